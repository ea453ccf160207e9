/* RMSNorm over rows (see rmsnorm.h). */
#include "stages/kernels/cpu/rmsnorm.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/kernels/cpu/scratch.h"

void em_rmsnorm(const float *x, const float *w, int T, int D, float eps, float *y, int threads) {
#pragma omp parallel for num_threads(threads) if ((int64_t)T * D >= EM_PARALLEL_MIN_WORK)
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * D;
        float *yt = y + (size_t)t * D;
        double ss = 0.0;
        for (int i = 0; i < D; i++) ss += (double)xt[i] * xt[i];
        float scale = (float)(1.0 / sqrt(ss / D + eps));
        for (int i = 0; i < D; i++) yt[i] = xt[i] * scale * w[i];
    }
}
