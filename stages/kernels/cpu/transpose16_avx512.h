/* A 16 x 16 float transpose in AVX-512 registers, for kernels that take 16 rows across the vector
 * lanes: the few-token GEMM (rows of floats) and the one-token F16 product (rows of halves). */
#ifndef EVALMESH_KERNELS_CPU_TRANSPOSE16_AVX512_H
#define EVALMESH_KERNELS_CPU_TRANSPOSE16_AVX512_H

#include <immintrin.h>

/* v[c] = column c of the 16 x 16 block whose row r is v[r] on entry (lane r of v[c] = entry
 * (r, c)): pairs of rows interleaved, then pairs of pairs, then the 128-bit lanes exchanged. */
__attribute__((target("avx512f"), always_inline)) static inline void
em_transpose16_avx512(__m512 v[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    /* s[4 i + j], 128-bit lane L: column 4 L + j of rows 4 i .. 4 i + 3 */
    __m512 s[16];
    for (int i = 0; i < 16; i += 4) {
        __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]),
                c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        s[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        s[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        s[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        s[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    /* column 4 L + j: 128-bit lane m from s[4 m + j]'s lane L */
    for (int j = 0; j < 4; j++) {
        __m512 lo0 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0x44),
               lo1 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0xee),
               hi0 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0x44),
               hi1 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0xee);
        v[j] = _mm512_shuffle_f32x4(lo0, hi0, 0x88);
        v[4 + j] = _mm512_shuffle_f32x4(lo0, hi0, 0xdd);
        v[8 + j] = _mm512_shuffle_f32x4(lo1, hi1, 0x88);
        v[12 + j] = _mm512_shuffle_f32x4(lo1, hi1, 0xdd);
    }
}

#endif
