/* AVX2 row functions for the common quantized types whose scalar loops the compiler does not
 * vectorize well (4-bit nibbles, table lookups, Q6_K's split bits): Q4_0, Q4_1, IQ4_NL, IQ4_XS,
 * Q6_K. Each value is computed with the same float operations as the scalar row function of
 * its type (an int converted to float, one multiply, for Q4_1 then one add; no fused
 * multiply-add), so the floats are the same bit for bit; test_ggml_types checks both paths. */
#include <immintrin.h>

#include "stages/formats/dequantize_rows.h"

#define QK 32
#define QK_K 256
#define AVX2 __attribute__((target("avx2")))

/* 8 int32 as floats, times scale, stored at y. */
AVX2 static inline void store_scaled(__m256i q, __m256 scale, float *y) {
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale));
}

/* 16 unsigned bytes (minus `offset`) times scale into y[0..15]. */
AVX2 static inline void bytes16_scaled(__m128i b, int offset, __m256 scale, float *y) {
    __m256i off = _mm256_set1_epi32(offset);
    store_scaled(_mm256_sub_epi32(_mm256_cvtepu8_epi32(b), off), scale, y);
    store_scaled(_mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)), off), scale, y + 8);
}

/* 16 signed bytes times scale into y[0..15]. */
AVX2 static inline void sbytes16_scaled(__m128i b, __m256 scale, float *y) {
    store_scaled(_mm256_cvtepi8_epi32(b), scale, y);
    store_scaled(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)), scale, y + 8);
}

/* The low and high nibbles of 16 bytes. */
AVX2 static inline void nibbles(const uint8_t *p, __m128i *lo, __m128i *hi) {
    __m128i raw = _mm_loadu_si128((const __m128i *)p), mask = _mm_set1_epi8(0x0f);
    *lo = _mm_and_si128(raw, mask);
    *hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
}

AVX2 void em_q4_0_row_avx2(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 18;
        __m256 d = _mm256_set1_ps(em_half_at(block));
        __m128i lo, hi;
        nibbles(block + 2, &lo, &hi);
        bytes16_scaled(lo, 8, d, dst + b * QK);
        bytes16_scaled(hi, 8, d, dst + b * QK + 16);
    }
}

/* 16 nibbles as floats times d plus m (two roundings, as the scalar q * d + m). */
AVX2 static inline void nibbles16_affine(__m128i q, __m256 d, __m256 m, float *y) {
    __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
    __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(f0, d), m));
    _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(f1, d), m));
}

AVX2 void em_q4_1_row_avx2(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 20;
        __m256 d = _mm256_set1_ps(em_half_at(block)), m = _mm256_set1_ps(em_half_at(block + 2));
        __m128i lo, hi;
        nibbles(block + 4, &lo, &hi);
        nibbles16_affine(lo, d, m, dst + b * QK);
        nibbles16_affine(hi, d, m, dst + b * QK + 16);
    }
}

/* 32 values of an IQ4 sub-block (16 bytes of nibbles) times dl: the nibbles index
 * em_iq4nl_values through a byte shuffle. */
AVX2 static inline void iq4_32(const uint8_t *qs, __m256 dl, float *y) {
    __m128i table = _mm_loadu_si128((const __m128i *)em_iq4nl_values), lo, hi;
    nibbles(qs, &lo, &hi);
    sbytes16_scaled(_mm_shuffle_epi8(table, lo), dl, y);
    sbytes16_scaled(_mm_shuffle_epi8(table, hi), dl, y + 16);
}

AVX2 void em_iq4_nl_row_avx2(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 18;
        iq4_32(block + 2, _mm256_set1_ps(em_half_at(block)), dst + b * QK);
    }
}

AVX2 void em_iq4_xs_row_avx2(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 136;
        float d = em_half_at(block), *y = dst + b * QK_K;
        unsigned scales_h = (unsigned)block[2] | (unsigned)block[3] << 8;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((block[4 + ib / 2] >> (4 * (ib % 2))) & 0x0f) |
                     (int)((scales_h >> (2 * ib)) & 3) << 4;
            iq4_32(block + 8 + 16 * ib, _mm256_set1_ps(d * (float)(ls - 32)), y + 32 * ib);
        }
    }
}

/* Q6_K (layout in dequantize_k.c): per group g of 32 values, the 6-bit q is a nibble of
 * ql[32 (g%2) + l] and bit pair g of qh[l]; each 16 values share dl = d * scale. */
AVX2 void em_q6_k_row_avx2(const void *src, float *dst, int64_t n) {
    const __m256i mask4 = _mm256_set1_epi8(0x0f), mask2 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 210;
        const int8_t *sc = (const int8_t *)(block + 192);
        float d = em_half_at(block + 208), *y = dst + b * QK_K;
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = block + 64 * half, *qh = block + 128 + 32 * half;
            __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            for (int g = 0; g < 4; g++, y += 32) {
                __m256i lo = g % 2 ? l1 : l0;
                lo = _mm256_and_si256(g < 2 ? lo : _mm256_srli_epi16(lo, 4), mask4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * g), mask2);
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)),
                                            _mm256_set1_epi8(32));
                __m256 dl0 = _mm256_set1_ps(d * (float)sc[8 * half + 2 * g]);
                __m256 dl1 = _mm256_set1_ps(d * (float)sc[8 * half + 2 * g + 1]);
                sbytes16_scaled(_mm256_castsi256_si128(q), dl0, y);
                sbytes16_scaled(_mm256_extracti128_si256(q, 1), dl1, y + 16);
            }
        }
    }
}

/* Whether this CPU runs AVX2. */
bool em_cpu_has_avx2(void) {
    return __builtin_cpu_supports("avx2");
}
