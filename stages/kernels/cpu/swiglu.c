/* SwiGLU and GeGLU (see swiglu.h), in chunks so the exponentials run as one vectorized pass. */
#include "stages/kernels/cpu/swiglu.h"

#include "stages/kernels/cpu/fast_exp.h"

#define CHUNK 256

void em_swiglu(float *gate, const float *up, size_t n) {
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        float *g = gate + i0;
        const float *u = up + i0;
        float e[CHUNK]; /* exp(-g) */
        for (size_t i = 0; i < m; i++) e[i] = -g[i];
        em_exp_inplace(e, m);
        for (size_t i = 0; i < m; i++) g[i] = g[i] / (1.0f + e[i]) * u[i];
    }
}

void em_geglu(float *gate, const float *up, size_t n) {
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        float *g = gate + i0;
        const float *u = up + i0;
        float e[CHUNK]; /* exp(-2y) */
        for (size_t i = 0; i < m; i++)
            e[i] = -1.5957691216f * (g[i] + 0.044715f * g[i] * g[i] * g[i]); /* 2 sqrt(2/pi) */
        em_exp_inplace(e, m);
        for (size_t i = 0; i < m; i++) g[i] = g[i] / (1.0f + e[i]) * u[i];
    }
}
