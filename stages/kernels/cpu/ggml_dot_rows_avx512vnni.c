/* The `ggml` precision's dot products of a few tokens (T <= 4: a decoding step, or a few sequences
 * decoded together) on AVX512-VNNI (see ggml_dot.h), for the 32-value block types (IQ4_NL's and
 * MXFP4's values looked up from their nibbles). The 16 lanes
 * of a vector are 16 weight rows, so no lane idles when T is 1 (the token-lane kernels would leave
 * 15 of 16 idle).
 *
 * Per block, the 16 rows' quants are loaded once as 4 vectors of 4 rows each, a row per 128-bit
 * lane (vector i holds rows i, 4 + i, 8 + i, 12 + i): its low half (quants 0..15: the low
 * nibbles, or Q8_0's first 16 bytes) and its high half (16..31), unsigned (Q8_0's signed bytes
 * offset by 128, corrected below like Q4_0's and Q5_0's stored offsets). Per token, two vpdpbusd
 * against the token's halves broadcast to every lane give each row 4 exact partial sums, and two
 * rounds of unpack-and-add leave row k's exact sum in lane k. The block's float steps then run on
 * the 16 rows at once in the C version's order, one IEEE rounding each, so each lane gets the C
 * result's bits. A last group of fewer than 16 rows repeats its last row in the idle lanes and
 * keeps the live ones. */
#include "stages/kernels/cpu/ggml_dot.h"

#include "stages/kernels/cpu/ggml_dot_lanes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define VNNI __attribute__((target(EM_GGML_LANES_TARGET)))
#define ROWS 16           /* rows per group: the lanes */
#define PREFETCH_GROUPS 2 /* how far ahead a group fetches rows, in groups */

/* One half (16 quants from byte `at` of each row's block, 4 rows per 128-bit lane as above) as
 * unsigned bytes. */
VNNI static inline __m512i four_rows(const uint8_t *const blk[ROWS], int i, int at) {
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk[i] + at)));
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(blk[4 + i] + at)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(blk[8 + i] + at)), 2);
    return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(blk[12 + i] + at)), 3);
}

/* The mask of bytes of vector i's half (high: quants 16..31) whose quant has its fifth bit set. */
VNNI static inline __mmask64 fifth_bits(const uint8_t *const blk[ROWS], int i, int qh, bool high) {
    uint64_t mask = 0;
    for (int lane = 0; lane < 4; lane++) {
        uint32_t bits;
        memcpy(&bits, blk[4 * lane + i] + qh, 4);
        mask |= (uint64_t)(high ? bits >> 16 : bits & 0xffff) << (16 * lane);
    }
    return (__mmask64)mask;
}

/* The 16 rows' exact integer block sums (lane k: row k) from the vectors' partial sums p[i]. */
VNNI static inline __m512i row_sums(const __m512i p[4]) {
    __m512i a =
        _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    __m512i b =
        _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    /* per 128-bit lane L: a = [p0, p1, p0, p1] and b = [p2, p3, p2, p3], each a pair's sum */
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

/* Rows w .. w + (rows - 1) row_bytes (rows <= 16) times tokens 0 .. x->T - 1 into ct. */
VNNI static inline __attribute__((always_inline)) void
row_group(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int rows,
          const em_q8_activations *x, float *ct, size_t ldc) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    const bool with_min = type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1;
    /* the offset subtracted from each unsigned quant: 128 (signed quants as shifted), 8, 16 or
     * none */
    const int offset = em_ggml_signed_quants(type) ? 128 : L.offset;
    const int T = x->T;
    __m512 acc[4];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *blk[ROWS];
    for (int r = 0; r < ROWS; r++) blk[r] = w + (size_t)(r < rows ? r : rows - 1) * row_bytes;
    /* the rows two groups on (after these in memory), fetched into L2 while these compute: each
     * row's stream is too short for the hardware's prefetcher to find in time. Into L2, not L1:
     * prefetches into L1 of the next group only left the products (every row streamed from
     * memory) at 20 GB/s where 2 threads read 27; SmolLM2's output head went from 1.55 to
     * 1.10 ms */
    const char *next = (const char *)w + (size_t)PREFETCH_GROUPS * ROWS * row_bytes;
    const size_t lines = (size_t)ROWS * row_bytes / 64,
                 per_block = (lines + (size_t)x->blocks - 1) / (size_t)x->blocks;
    for (int b = 0; b < x->blocks; b++) {
        for (size_t l = (size_t)b * per_block; l < (size_t)(b + 1) * per_block && l < lines; l++)
            _mm_prefetch(next + 64 * l, _MM_HINT_T1);
        __m512i lo[4], hi[4];
        for (int i = 0; i < 4; i++) {
            if (type == EM_GGML_DOT_Q8_0) {
                const __m512i sign = _mm512_set1_epi8((char)0x80);
                lo[i] = _mm512_xor_si512(four_rows(blk, i, L.qs), sign);
                hi[i] = _mm512_xor_si512(four_rows(blk, i, L.qs + 16), sign);
            } else {
                const __m512i nibble = _mm512_set1_epi8(15);
                __m512i z = four_rows(blk, i, L.qs);
                lo[i] = _mm512_and_si512(z, nibble);
                hi[i] = _mm512_and_si512(_mm512_srli_epi16(z, 4), nibble);
                if (L.qh) {
                    const __m512i fifth = _mm512_set1_epi8(0x10);
                    lo[i] =
                        _mm512_mask_add_epi8(lo[i], fifth_bits(blk, i, L.qh, false), lo[i], fifth);
                    hi[i] =
                        _mm512_mask_add_epi8(hi[i], fifth_bits(blk, i, L.qh, true), hi[i], fifth);
                }
                if (L.values) { /* IQ4_NL's or MXFP4's values, shifted as Q8_0's */
                    const __m512i table = _mm512_broadcast_i32x4(
                                      _mm_loadu_si128((const __m128i *)L.values)),
                                  sign = _mm512_set1_epi8((char)0x80);
                    lo[i] = _mm512_xor_si512(_mm512_shuffle_epi8(table, lo[i]), sign);
                    hi[i] = _mm512_xor_si512(_mm512_shuffle_epi8(table, hi[i]), sign);
                }
            }
        }
        /* the rows' scale and fp16 minimum: the block's first 4 bytes */
        uint32_t dm[ROWS];
        for (int r = 0; r < ROWS; r++) memcpy(&dm[r], blk[r], 4);
        __m512i dm16 = _mm512_loadu_si512(dm);
        __m512 dw = em_ggml_scales_of(type, dm16);
        __m512 mw = with_min ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm16, 16)))
                             : _mm512_setzero_ps();
        for (int t = 0; t < T; t++) {
            size_t at = (size_t)b * x->tokens + t;
            const int8_t *y = x->qs + at * EM_Q8_BLOCK;
            __m512i ylo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)y));
            __m512i yhi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y + 16)));
            __m512i p[4];
            for (int i = 0; i < 4; i++)
                p[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[i], ylo),
                                           hi[i], yhi);
            __m512i sumi = row_sums(p);
            if (offset) sumi = _mm512_sub_epi32(sumi, _mm512_set1_epi32(offset * x->sum[at]));
            __m512 fsum = _mm512_cvtepi32_ps(sumi), dx = _mm512_set1_ps(x->d[at]);
            __m512 step = em_ggml_block_step(type, fsum, dw, dx);
            if (with_min) step = _mm512_add_ps(step, _mm512_mul_ps(mw, _mm512_set1_ps(x->s[at])));
            acc[t] = _mm512_add_ps(acc[t], step);
        }
        for (int r = 0; r < ROWS; r++) blk[r] += L.bytes;
    }
    for (int t = 0; t < x->tokens; t++) {
        float lanes[ROWS];
        _mm512_storeu_ps(lanes, t < T ? acc[t] : _mm512_setzero_ps()); /* padding tokens: 0 */
        for (int r = 0; r < rows; r++) ct[(size_t)r * ldc + t] = lanes[r];
    }
}

#define ROWS_TILE(name, column)                                                                    \
    VNNI static void rows_##name(const uint8_t *w, size_t row_bytes, int rows,                     \
                                 const em_q8_activations *x, float *ct, size_t ldc) {              \
        for (int r0 = 0; r0 < rows; r0 += ROWS)                                                    \
            row_group(column, w + (size_t)r0 * row_bytes, row_bytes,                               \
                      rows - r0 < ROWS ? rows - r0 : ROWS, x, ct + (size_t)r0 * ldc, ldc);         \
    }
ROWS_TILE(q8_0, EM_GGML_DOT_Q8_0)
ROWS_TILE(q4_0, EM_GGML_DOT_Q4_0)
ROWS_TILE(q4_1, EM_GGML_DOT_Q4_1)
ROWS_TILE(q5_0, EM_GGML_DOT_Q5_0)
ROWS_TILE(q5_1, EM_GGML_DOT_Q5_1)
ROWS_TILE(iq4_nl, EM_GGML_DOT_IQ4_NL)
ROWS_TILE(mxfp4, EM_GGML_DOT_MXFP4)

em_ggml_tile_fn *const em_ggml_rows_avx512vnni[EM_GGML_DOT_TYPES] = {
    [EM_GGML_DOT_Q8_0] = rows_q8_0,   [EM_GGML_DOT_Q4_0] = rows_q4_0,
    [EM_GGML_DOT_Q4_1] = rows_q4_1,   [EM_GGML_DOT_Q5_0] = rows_q5_0,
    [EM_GGML_DOT_Q5_1] = rows_q5_1,   [EM_GGML_DOT_IQ4_NL] = rows_iq4_nl,
    [EM_GGML_DOT_MXFP4] = rows_mxfp4,
};
#endif
