/* IEEE half (F16) and bfloat16 (BF16) conversions to and from float, rounding to nearest even.
 * Used when a loader converts tensors and when the model maker writes them. */
#ifndef EVALMESH_HALF_H
#define EVALMESH_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t em_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float em_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float em_bf16_to_f32(uint16_t h) {
    return em_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t em_f32_to_bf16(float f) {
    uint32_t u = em_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static inline float em_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return em_f32_from_bits(sign | 0x7f800000u | (mant << 13)); /* inf, NaN */
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 */
        float f = (float)mant * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return em_f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t em_f32_to_f16(float f) {
    uint32_t u = em_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00;  /* NaN */
    if (abs >= 0x477ff000u) return sign | 0x7c00; /* rounds to infinity (>= 65520) */
    if (abs < 0x38800000u) {                      /* below the smallest normal 2^-14 */
        if (abs < 0x33000000u) return sign;       /* rounds to zero (< 2^-25) */
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u; /* with the implicit bit */
        uint32_t shift = 126 - exp;                    /* 14..24: value = mant >> shift */
        uint32_t half = mant >> shift;
        uint32_t rest = mant & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (half & 1))) half++;
        return sign | (uint16_t)half;
    }
    uint32_t h = ((abs >> 13) - (112u << 10));
    uint32_t rest = abs & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

#endif
