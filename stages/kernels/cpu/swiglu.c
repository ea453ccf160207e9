/* SwiGLU (see swiglu.h), in chunks so the exponentials run as one vectorized pass. */
#include "stages/kernels/cpu/swiglu.h"

#include "stages/kernels/cpu/fast_exp.h"
#include "stages/kernels/cpu/scratch.h"

#define CHUNK 256

void em_swiglu(float *gate, const float *up, size_t n, int threads) {
    size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(threads) if (n >= EM_PARALLEL_MIN_ELEMENTS)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = c * CHUNK, m = n - i0 < CHUNK ? n - i0 : CHUNK;
        float *g = gate + i0;
        const float *u = up + i0;
        float e[CHUNK]; /* exp(-g) */
        for (size_t i = 0; i < m; i++) e[i] = -g[i];
        em_exp_inplace(e, m);
        for (size_t i = 0; i < m; i++) g[i] = g[i] / (1.0f + e[i]) * u[i];
    }
}
