/* Vectorizable exp over arrays (see fast_exp.h). */
#include "stages/kernels/cpu/fast_exp.h"

#include <stdint.h>

/* e^x for x in [-87, 88]. */
static inline float exp_in_range(float x) {
    /* n = round(x / ln 2): adding 1.5 * 2^23 leaves the rounded integer in the low bits */
    float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - fn * 0.693359375f; /* ln 2 = 0.693359375 - 2.12194440e-4, exactly */
    r = r + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        uint32_t u;
        float f;
    } scale = {.u = (uint32_t)((int32_t)fn + 127) << 23}; /* 2^n */
    return p * scale.f;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void em_exp_inplace(float *x,
                                                                                 size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i] < -87.0f ? -87.0f : x[i];
        x[i] = v > 88.0f ? 88.0f : v;
    }
    for (size_t i = 0; i < n; i++) x[i] = exp_in_range(x[i]);
}
