/* What the x86 kernels of the `ggml` precision whose lanes are 16 tokens share (ggml_dot.h:
 * avx512vnni, amx): a group of tokens' activations transposed to token lanes, a block's 32 quants
 * unpacked to bytes, its scales. Inline, compiled with each caller's target. */
#ifndef EVALMESH_KERNELS_GGML_DOT_LANES_H
#define EVALMESH_KERNELS_GGML_DOT_LANES_H

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "stages/formats/dequantize_rows.h"
#include "stages/kernels/cpu/ggml_dot.h"

#define EM_GGML_LANES 16 /* tokens per vector */
/* Tiles of at most this many tokens take lanes of rows (ggml_dot_rows_avx512vnni.c; the K-quants
 * avx2's tiles) and read no token lanes. */
#define EM_GGML_ROW_LANE_TOKENS 4
#define EM_GGML_LANES_TARGET "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"

/* The fp16 at p as a float. */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline float
em_ggml_half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* A 32-value block's scale dw: its fp16 d, or MXFP4's E8M0 exponent halved. */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline float
em_ggml_scale_at(em_ggml_dot_type type, const uint8_t *blk) {
    return em_ggml_block_layout_of(type).e8m0 ? em_e8m0_half(blk[0]) : em_ggml_half_at(blk);
}

/* The same for 16 blocks at once from dword r of d (the blocks' first 4 bytes): the fp16 in its
 * low half, or the E8M0 exponent in its low byte as em_e8m0_half builds it. */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline __m512
em_ggml_scales_of(em_ggml_dot_type type, __m512i d) {
    if (!em_ggml_block_layout_of(type).e8m0) return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d));
    __m512i e = _mm512_and_si512(d, _mm512_set1_epi32(255));
    __mmask16 subnormal = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    __m512i bits = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    bits = _mm512_mask_sllv_epi32(bits, subnormal, _mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(bits);
}

/* A 32-value block's float step before any minimum, in the order of ggml's reference dot product
 * of its type, one IEEE rounding each: sumi * (dw * dx) for Q8_0, (sumi * dw) * dx for Q4_0 and
 * (dw * dx) * sumi for the others (fsum: the exact integer sum as a float). */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline __m512
em_ggml_block_step(em_ggml_dot_type type, __m512 fsum, __m512 dw, __m512 dx) {
    if (type == EM_GGML_DOT_Q8_0) return _mm512_mul_ps(fsum, _mm512_mul_ps(dw, dx));
    if (type == EM_GGML_DOT_Q4_0) return _mm512_mul_ps(_mm512_mul_ps(fsum, dw), dx);
    return _mm512_mul_ps(_mm512_mul_ps(dw, dx), fsum);
}

/* The lanes live in a group of n tokens (n <= 16). */
static inline __mmask16 em_ggml_live_lanes(int n) {
    return (__mmask16)((1u << n) - 1u);
}

/* The token lanes of tokens c0 .. c0 + 15 (c0 a multiple of 16) from block b on: for block b + i,
 * vectors 8 i + k (k < 8) hold dword k (activation values 4 k .. 4 k + 3) of each token, lane t for
 * token c0 + t (zeros past the last token), as vpdpbusd's second operand takes them and as an AMX
 * B tile (8 rows of 16 tokens' 4 bytes). Filled by em_ggml_fill_token_lanes after each
 * quantization. */
static inline const __m512i *em_ggml_lanes_at(const em_q8_activations *x, int c0, int b) {
    return (const __m512i *)(x->lanes +
                             ((size_t)(c0 / EM_GGML_LANES) * (size_t)x->blocks + (size_t)b) *
                                 EM_Q8_LANE_BYTES);
}

/* A decoding step of 5 to 16 sequences meets each weight block once, so its tiles wait on the
 * weights: while a group of rows computes a chunk of blocks, the next group's chunk is asked for
 * into L2, spread evenly over the chunk's blocks. em_ggml_next_rows says which rows come next;
 * em_ggml_prefetch_step, called once a block, asks for that block's share of their lines. */
typedef struct em_ggml_prefetch {
    const char *next;    /* the next group's first row at the chunk's first block; NULL: none */
    size_t row_bytes;    /* between its rows */
    size_t row_lines;    /* cache lines of a row's chunk (one more, as it may straddle a line) */
    size_t total, steps; /* lines in all, spread over steps calls */
    size_t row, line, owed;
} em_ggml_prefetch;

/* The rows after rows r0 .. r0 + group - 1 of a tile of `rows` rows at w, in its chunk of blocks
 * b0 .. b0 + nb - 1 (of `blocks`, block_bytes each): the chunk's next group, else the next chunk's
 * first, else the first chunk of the rows past the tile (a thread's tiles are neighbours, so
 * mostly its next tile's; a prefetch past the matrix never faults). */
static inline const uint8_t *em_ggml_next_rows(const uint8_t *w, size_t row_bytes, int rows, int r0,
                                               int group, int b0, int nb, int blocks,
                                               size_t block_bytes) {
    if (r0 + group < rows) return w + (size_t)(r0 + group) * row_bytes + (size_t)b0 * block_bytes;
    if (b0 + nb < blocks) return w + (size_t)(b0 + nb) * block_bytes;
    return w + (size_t)rows * row_bytes;
}

/* Asks for `rows` rows of nb blocks (block_bytes each) from next over nb steps. */
static inline em_ggml_prefetch em_ggml_prefetch_start(const uint8_t *next, size_t row_bytes,
                                                      int rows, int nb, size_t block_bytes) {
    size_t row_lines = ((size_t)nb * block_bytes + 63) / 64 + 1;
    return (em_ggml_prefetch){(const char *)next, row_bytes, row_lines, (size_t)rows * row_lines,
                              (size_t)nb,         0,         0,         0};
}

/* One step's share of the lines (a Bresenham count: no division). */
static inline __attribute__((always_inline)) void em_ggml_prefetch_step(em_ggml_prefetch *p) {
    if (!p->next) return;
    for (p->owed += p->total; p->owed >= p->steps; p->owed -= p->steps) {
        _mm_prefetch(p->next + p->row * p->row_bytes + 64 * p->line, _MM_HINT_T2);
        if (++p->line == p->row_lines) p->line = 0, p->row++;
    }
}

/* Fills x->lanes from x's 32-value form (the amx and avx512vnni rows' prepare): every group of 16
 * tokens transposed once per product, not once per tile of rows. */
void em_ggml_fill_token_lanes(em_q8_activations *x, int threads);
/* Fills x's K-quant lanes (x->k4lanes and k4bsums where q4k, x->k6lanes where q6k, grown as
 * needed) from its Q8_K form (the amx and avx512vnni rows' prepare_k): each group of 16 tokens
 * rearranged once per product. Rearranging once per tile of 48 rows took 14% of a Q4_K and 18% of a
 * Q6_K perplexity run. */
void em_ggml_fill_k_lanes(em_q8_activations *x, bool q4k, bool q6k, int threads);

/* The 32 nibbles of the 16 bytes at qs as bytes: value j < 16 the low nibble of byte j, value
 * 16 + j its high nibble. */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline __m256i
em_ggml_nibbles(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
}

/* The signed bytes values[n] of 32 nibbles n (IQ4_NL's em_iq4nl_values, MXFP4's em_mxfp4_values).
 */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline __m256i
em_ggml_nibble_values(const int8_t values[16], __m256i n) {
    __m128i table = _mm_loadu_si128((const __m128i *)values);
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), n);
}

/* The 32 quants of a block (a type of em_ggml_block_layout_of) as bytes, value j in byte j: Q8_0's
 * as stored, IQ4_NL's and MXFP4's values of their nibbles (signed), the others' nibbles with their
 * fifth bits, the stored offset still in. */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline __m256i
em_ggml_block_quants(em_ggml_dot_type type, const uint8_t *blk) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    if (type == EM_GGML_DOT_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + L.qs));
    __m256i q = em_ggml_nibbles(blk + L.qs);
    if (L.qh) {
        uint32_t bits;
        memcpy(&bits, blk + L.qh, 4);
        /* byte j: bit j of the 32 as 0x10 */
        q = _mm256_or_si256(q, _mm256_maskz_mov_epi8((__mmask32)bits, _mm256_set1_epi8(0x10)));
    }
    return L.values ? em_ggml_nibble_values(L.values, q) : q;
}

/* The 256 values of a Q6_K, Q3_K, Q4_K or Q5_K block (at blk) times their sub-block scales, as
 * em_ggml_k_folded, in words: words[v] holds values 32 v .. 32 v + 31. */
__attribute__((target(EM_GGML_LANES_TARGET))) static inline void
em_ggml_k_folded_words(em_ggml_dot_type type, const uint8_t *blk, __m512i words[8]) {
    if (type == EM_GGML_DOT_Q4_K || type == EM_GGML_DOT_Q5_K) {
        const bool five_bits = type == EM_GGML_DOT_Q5_K;
        const __m256i low = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
        for (int j = 0; j < 8; j++) { /* sub-block j: values 32 j + l, the low or high nibbles */
            __m256i q =
                _mm256_loadu_si256((const __m256i *)(blk + (five_bits ? 48 : 16) + 32 * (j / 2)));
            q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(q, 4) : q, low);
            if (five_bits)
                q = _mm256_or_si256(
                    q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, j), one), 4));
            uint8_t scale, min;
            em_k4_scale_min(j, blk + 4, &scale, &min);
            words[j] = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(q), _mm512_set1_epi16(scale));
        }
        return;
    }
    int8_t scale[16];
    if (type == EM_GGML_DOT_Q3_K)
        em_k3_scales(blk + 96, scale);
    else
        memcpy(scale, blk + 192, 16);
    const __m256i low = _mm256_set1_epi8(15), two = _mm256_set1_epi8(0x30),
                  three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)blk); /* Q3_K's hmask */
    for (int h = 0; h < 2; h++) {
        __m256i q[4]; /* values 128 h + 32 k + l, l < 32: sub-blocks 8 h + 2 k and 8 h + 2 k + 1 */
        if (type == EM_GGML_DOT_Q3_K) { /* 2 bits of qs, less 4 where the hmask bit is clear */
            __m256i qs = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), three);
                __m256i high = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
                q[k] = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(high, 2)),
                                       _mm256_set1_epi8(4));
            }
        } else { /* Q6_K: a nibble of ql with 2 bits of qh above it, less 32 */
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            __m256i hi[4] = {_mm256_and_si256(_mm256_slli_epi16(qh, 4), two),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), two),
                             _mm256_and_si256(qh, two),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), two)};
            __m256i lo[4] = {_mm256_and_si256(ql0, low), _mm256_and_si256(ql1, low),
                             _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low),
                             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low)};
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_sub_epi8(_mm256_or_si256(lo[k], hi[k]), _mm256_set1_epi8(32));
        }
        for (int k = 0; k < 4; k++) {
            int j = 8 * h + 2 * k;
            __m512i sc =
                _mm512_inserti64x4(_mm512_set1_epi16(scale[j]), _mm256_set1_epi16(scale[j + 1]), 1);
            words[4 * h + k] = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(q[k]), sc);
        }
    }
}

/* The 32-value block types' tiles of 4 tokens or fewer on AVX512-VNNI, lanes being rows
 * (ggml_dot_rows_avx512vnni.c); the K-quants' entries are NULL. */
extern em_ggml_tile_fn *const em_ggml_rows_avx512vnni[EM_GGML_DOT_TYPES];

#endif
#endif
