/* RMSNorm over rows (see rmsnorm.h). */
#include "stages/kernels/cpu/rmsnorm.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/kernels/cpu/scratch.h"

void em_rmsnorm(const float *x, const float *w, int T, int D, float eps, float *y, int threads) {
#pragma omp parallel for num_threads(threads) if ((int64_t)T * D >= EM_PARALLEL_MIN_ELEMENTS)
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * D;
        float *yt = y + (size_t)t * D;
        /* eight running sums (vector lanes), combined in a fixed order */
        double lane[8] = {0};
        int i = 0;
        for (; i + 8 <= D; i += 8) {
            for (int l = 0; l < 8; l++) lane[l] += (double)xt[i + l] * xt[i + l];
        }
        for (; i < D; i++) lane[0] += (double)xt[i] * xt[i];
        double ss = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                    ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        float scale = (float)(1.0 / sqrt(ss / D + eps));
        for (int i = 0; i < D; i++) yt[i] = xt[i] * scale * w[i];
    }
}
