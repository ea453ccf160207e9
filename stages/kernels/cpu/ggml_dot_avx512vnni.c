/* The `ggml` precision's AVX512-VNNI kernel (see ggml_dot.h): the 16 lanes of a vector are 16
 * tokens of one weight row. A group of 16 tokens' activations is transposed once per product (the
 * row's prepare, em_ggml_fill_token_lanes: vector k of a block holds dword k, activation values 4k
 * .. 4k + 3, of each token), so that a weight block's integer products are 8 vpdpbusd of its
 * unpacked quants' dword k, broadcast, against vector k: unsigned quants times signed activations,
 * 4 products per lane and step, exact 32-bit sums. Signed Q8_0, IQ4_NL and MXFP4 quants are offset
 * to unsigned (q + 128) and, like Q4_0's and Q5_0's stored offsets, corrected by offset *
 * sum(activations). The block's float steps then run on the 16 (row, token) lanes in the order of
 * the C version, one IEEE rounding each, so each lane gets the C result's bits; a row's sums pass
 * through ct between chunks of blocks (a stored float reloads exact). Rows go in groups of 8
 * (IQ4_XS's, Q2_K's and the lattice types' too; Q6_K's and Q3_K's in pairs, Q4_K's and Q5_K's
 * alone: see kquant_tile), so that one load of an activation vector serves each row's product: one
 * row alone spends a 64-byte load and a broadcast on each. The K-quants' lanes are tokens too: one
 * vector per integer lane l of ggml_dot.h (see below); IQ4_XS reads Q4_K's lanes, the lattice IQ
 * types Q6_K's. With 4 tokens or fewer (a decoding step) 12 of 16 lanes would idle: those tiles
 * take lanes of rows instead (ggml_dot_rows_avx512vnni.c; the 256-value types' go to the avx2
 * kernel, whose 8-row tiles have the same bits). Its F16 column is ggml_dot_f16_avx512.c's. */
#include "stages/kernels/cpu/ggml_dot.h"

#include "stages/formats/dequantize_rows.h"
#include "stages/kernels/cpu/ggml_dot_iq.h"
#include "stages/kernels/cpu/ggml_dot_lanes.h"
#include "stages/kernels/cpu/scratch.h"
#include "util/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define VNNI __attribute__((target(EM_GGML_LANES_TARGET)))
#define LANES EM_GGML_LANES
#define BLOCK_CHUNK 64 /* blocks a row runs before its sums pass through ct */
#define ROW_GROUP 8    /* rows whose blocks share each load of an activation vector */
#define PAIR 2         /* the same for Q6_K and Q3_K: 8 lane sums a row */

/* The activation vector *v for `rows` rows' products: held in a register, loaded once, where
 * several rows use it (GCC would otherwise make it a memory operand of each product); one row
 * takes it as its product's memory operand. */
VNNI static inline __attribute__((always_inline)) __m512i shared_vector(int rows,
                                                                        const __m512i *v) {
    __m512i y = *v;
    if (rows > 1) __asm__("" : "+v"(y));
    return y;
}

/* acc += vpdpwssd(a, b), acc updated in its register: with the intrinsic GCC gave word_sums'
 * product a fresh register and copied it back to the lane's, two register copies a product. */
VNNI static inline __attribute__((always_inline)) void dpwssd_into(__m512i *acc, __m512i a,
                                                                   __m512i b) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(*acc) : "v"(a), "v"(b));
}

/* Blocks b0 .. b0 + nb - 1 of `rows` rows (1 or ROW_GROUP; row r at w + r row_bytes) times the
 * group's transposed activations yt, each vector of yt loaded once for all the rows; the sums of
 * earlier chunks (b0 > 0) read from out + r ldc [0 .. n - 1] and the rows' sums there after. */
VNNI static inline __attribute__((always_inline)) void
rows_chunk(em_ggml_dot_type type, int rows, const uint8_t *w, size_t row_bytes,
           const em_q8_activations *x, int c0, int n, int b0, int nb, const __m512i *yt, float *out,
           size_t ldc, em_ggml_prefetch next) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    const __mmask16 live = em_ggml_live_lanes(n);
    /* the offset subtracted from each unsigned quant: 128 (signed quants as shifted), 8, 16 or
     * none */
    const int offset = em_ggml_signed_quants(type) ? 128 : L.offset;
    const int offset_shift = offset ? __builtin_ctz((unsigned)offset) : 0;
    __m512 acc[ROW_GROUP];
    for (int r = 0; r < rows; r++)
        acc[r] = b0 ? _mm512_maskz_loadu_ps(live, out + r * ldc) : _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        em_ggml_prefetch_step(&next);
        const uint8_t *blk[ROW_GROUP];
        uint32_t q[ROW_GROUP][8];
        __m512i sumi[ROW_GROUP];
        for (int r = 0; r < rows; r++) {
            blk[r] = w + r * row_bytes + (size_t)(b0 + b) * L.bytes;
            __m256i quants = em_ggml_block_quants(type, blk[r]);
            if (em_ggml_signed_quants(type))
                quants = _mm256_xor_si256(quants, _mm256_set1_epi8((char)0x80));
            _mm256_storeu_si256((__m256i *)q[r], quants);
            /* broadcast from memory (a load each), not by shuffles of the register: those
             * compete with vpdpbusd for the vector ports */
            __asm__("" : "+m"(q[r]));
            sumi[r] = _mm512_setzero_si512();
        }
        for (int k = 0; k < 8; k++) {
            __m512i y = shared_vector(rows, &yt[8 * b + k]);
            for (int r = 0; r < rows; r++)
                sumi[r] = _mm512_dpbusd_epi32(sumi[r], _mm512_set1_epi32((int)q[r][k]), y);
        }
        size_t at = (size_t)(b0 + b) * x->tokens + c0;
        __m512 dx = _mm512_maskz_loadu_ps(live, x->d + at);
        __m512i offsets =
            offset ? _mm512_slli_epi32(_mm512_maskz_loadu_epi32(live, x->sum + at), offset_shift)
                   : _mm512_setzero_si512();
        for (int r = 0; r < rows; r++) {
            __m512 fsum = _mm512_cvtepi32_ps(_mm512_sub_epi32(sumi[r], offsets));
            __m512 step =
                em_ggml_block_step(type, fsum, _mm512_set1_ps(em_ggml_scale_at(type, blk[r])), dx);
            if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1) {
                __m512 mw = _mm512_set1_ps(em_ggml_half_at(blk[r] + L.m)),
                       sx = _mm512_maskz_loadu_ps(live, x->s + at);
                step = _mm512_add_ps(step, _mm512_mul_ps(mw, sx));
            }
            acc[r] = _mm512_add_ps(acc[r], step);
        }
    }
    for (int r = 0; r < rows; r++) _mm512_mask_storeu_ps(out + r * ldc, live, acc[r]);
}

/* The token lanes (em_ggml_lanes_at) of group g: one gather per vector. */
VNNI static void fill_group(em_q8_activations *x, int g) {
    const __m512i token_at = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96,
                                               104, 112, 120); /* dwords */
    int c0 = g * LANES, n = x->tokens - c0 < LANES ? x->tokens - c0 : LANES;
    __m512i *yt = (__m512i *)em_ggml_lanes_at(x, c0, 0);
    for (int b = 0; b < x->blocks; b++) {
        const int8_t *base = x->qs + ((size_t)b * x->tokens + c0) * EM_Q8_BLOCK;
        for (int k = 0; k < 8; k++)
            yt[8 * b + k] = _mm512_mask_i32gather_epi32(
                _mm512_setzero_si512(), em_ggml_live_lanes(n), token_at, base + 4 * k, 4);
    }
}

/* Rows w .. w + rows - 1 times every token of x, in groups of 16 tokens, chunks of blocks and
 * groups of 8 rows. With one group of tokens (a decoding step of 5 to 16 sequences) each weight
 * block meets one group, so each group of rows asks for the next group's weights while it computes
 * (em_ggml_prefetch): Xeon, 2 threads, EVALMESH_CPU_KERNEL=avx512vnni, ggml, 16 sequences, the
 * builds in turns: 110M Q8_0 576-593 -> 705-712 generated tokens/s, SmolLM2-135M Q4_1 512-518 ->
 * 580-611. */
VNNI static inline __attribute__((always_inline)) void
token_groups(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int rows,
             const em_q8_activations *x, float *ct, size_t ldc) {
    const size_t block_bytes = em_ggml_block_layout_of(type).bytes;
    const bool decoding = x->tokens <= LANES;
    for (int c0 = 0; c0 < x->tokens; c0 += LANES) {
        int n = x->tokens - c0 < LANES ? x->tokens - c0 : LANES;
        for (int b0 = 0; b0 < x->blocks; b0 += BLOCK_CHUNK) {
            int nb = x->blocks - b0 < BLOCK_CHUNK ? x->blocks - b0 : BLOCK_CHUNK;
            const __m512i *yt = em_ggml_lanes_at(x, c0, b0);
            int j = 0;
            for (; j + ROW_GROUP <= rows; j += ROW_GROUP) {
                const uint8_t *next = decoding ? em_ggml_next_rows(w, row_bytes, rows, j, ROW_GROUP,
                                                                   b0, nb, x->blocks, block_bytes)
                                               : NULL;
                rows_chunk(type, ROW_GROUP, w + (size_t)j * row_bytes, row_bytes, x, c0, n, b0, nb,
                           yt, ct + (size_t)j * ldc + c0, ldc,
                           em_ggml_prefetch_start(next, row_bytes, ROW_GROUP, nb, block_bytes));
            }
            for (; j < rows; j++)
                rows_chunk(type, 1, w + (size_t)j * row_bytes, row_bytes, x, c0, n, b0, nb, yt,
                           ct + (size_t)j * ldc + c0, ldc,
                           em_ggml_prefetch_start(NULL, row_bytes, 1, nb, block_bytes));
        }
    }
}

#define VNNI_TILE(name, column)                                                                    \
    VNNI static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                     \
                                 const em_q8_activations *x, float *ct, size_t ldc) {              \
        if (x->tokens <= EM_GGML_ROW_LANE_TOKENS)                                                  \
            em_ggml_rows_avx512vnni[column](w, row_bytes, rows, x, ct, ldc);                       \
        else                                                                                       \
            token_groups(column, w, row_bytes, rows, x, ct, ldc);                                  \
    }
VNNI_TILE(q8_0, EM_GGML_DOT_Q8_0)
VNNI_TILE(q4_0, EM_GGML_DOT_Q4_0)
VNNI_TILE(q4_1, EM_GGML_DOT_Q4_1)
VNNI_TILE(q5_0, EM_GGML_DOT_Q5_0)
VNNI_TILE(q5_1, EM_GGML_DOT_Q5_1)
VNNI_TILE(iq4_nl, EM_GGML_DOT_IQ4_NL)
VNNI_TILE(mxfp4, EM_GGML_DOT_MXFP4)

/* The K-quants Q6_K, Q3_K, Q4_K and Q5_K (ggml_dot.h, ggml_dot.c; Q3_K as Q6_K with 3-bit quants,
 * Q5_K as Q4_K with 5-bit quants): a vector per integer lane l, its 16 lanes the tokens. Both the
 * weights' and the activations' sub-blocks are rearranged so that dword l of a sub-block holds its
 * values of lane l: Q4_K's 32-value sub-block values l, l + 8, l + 16, l + 24 as bytes (vpmaddubsw
 * sums them in pairs, each pair's sum below 2^13 in magnitude; then vpdpwssd adds both pairs times
 * the 6-bit scale into lane l; vpdpbusd into a zeroed register, then vpdpwssd, cost GCC a register
 * copy of the zero for each product: 302 against 330 GFLOP/s on the Xeon); Q6_K's 16-value
 * sub-block values l and l + 8 as 16-bit words, the weight's already times its scale (vpdpwssd
 * adds both products into lane l). Q4_K's minima multiply the activations' 16-value sums, paired
 * in dwords as the minima are. The float steps are the C version's per (row, token): sums[l] += d *
 * lane_l per block, Q4_K's sumf -= dmin * summin, at the end sumf += sums[0] ... sums[7]. The
 * activations are rearranged once per product (em_ggml_fill_k_lanes); a batch of rows keeps its
 * sums while chunks of blocks pass. */
#define KBLOCK_CHUNK 4 /* blocks whose rearranged activations a batch of rows reads at once */
#define ROW_BATCH 48   /* rows sharing a chunk: a whole matmul tile */

/* Word 2 l of each 256-bit half takes word l of its first 128-bit lane, word 2 l + 1 word l of
 * its second: the lane-l values of a sub-block side by side. */
static const int16_t pair_words[32] = {0,  8,  1,  9,  2,  10, 3,  11, 4,  12, 5,
                                       13, 6,  14, 7,  15, 16, 24, 17, 25, 18, 26,
                                       19, 27, 20, 28, 21, 29, 22, 30, 23, 31};
/* Within 128 bits: bytes l and l + 8 side by side as word l. */
static const int8_t pair_bytes[16] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};

/* Two 32-value sub-blocks of bytes (one per 256-bit half) with dword l of each half holding its
 * values l, l + 8, l + 16, l + 24. */
VNNI static inline __m512i lane_bytes(__m512i z) {
    const __m512i bytes = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)pair_bytes));
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(pair_words), _mm512_shuffle_epi8(z, bytes));
}

/* Two 16-value sub-blocks of words (one per 256-bit half) with dword l of each holding its values
 * l and l + 8. */
VNNI static inline __m512i lane_words(__m512i z) {
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(pair_words), z);
}

/* yt[M b + m] = dword m of the rearranged activations of block b (M = 64 for Q4_K, sub-block j's
 * lane l at m = 8 j + l; M = 128 for Q6_K, likewise over its 16 sub-blocks), lane t for token c0 +
 * t (zeros beyond n), for every block b; Q4_K also ybs[8 b + i] = the 16-value sums 2 i and 2 i + 1
 * as a dword. */
VNNI static void rearrange_q8k(bool is_q4k, const em_q8_activations *x, int c0, int n, __m512i *yt,
                               __m512i *ybs) {
    const int M = is_q4k ? 64 : 128;
    uint32_t rt[LANES][128]; /* per token, the rearranged block */
    const __m512i token_at =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(128));
    const __m512i bsums_at =
        _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120);
    const __mmask16 live = em_ggml_live_lanes(n);
    for (int b = 0; b < x->kblocks; b++) {
        size_t at = (size_t)b * x->tokens + c0;
        for (int t = 0; t < n; t++) {
            const int8_t *y = x->kqs + (at + t) * EM_Q8K_BLOCK;
            for (int v = 0; v < M / 16; v++) {
                __m512i z = is_q4k ? lane_bytes(_mm512_loadu_si512(y + 64 * v))
                                   : lane_words(_mm512_cvtepi8_epi16(
                                         _mm256_loadu_si256((const __m256i *)(y + 32 * v))));
                _mm512_storeu_si512(rt[t] + 16 * v, z);
            }
        }
        for (int m = 0; m < M; m++)
            yt[M * b + m] =
                _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, token_at, &rt[0][m], 4);
        if (is_q4k)
            for (int i = 0; i < 8; i++)
                ybs[8 * b + i] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, bsums_at,
                                                             x->kbsums + at * 16 + 2 * i, 4);
    }
}

/* One row's float sums over a group's tokens (ggml_dot.c's sums[8] and sumf). */
typedef struct ksums {
    __m512 sums[8], sumf;
} ksums;

/* The lane sums' float step: sums[l] += (dw * kd) * (float)lane_l. */
VNNI static inline void lane_steps(ksums *s, float dw, __m512 kd, const __m512i lane[8]) {
    __m512 d = _mm512_mul_ps(_mm512_set1_ps(dw), kd);
    for (int l = 0; l < 8; l++)
        s->sums[l] = _mm512_add_ps(s->sums[l], _mm512_mul_ps(d, _mm512_cvtepi32_ps(lane[l])));
}

/* The quants of one Q4_K block (at blk), or Q5_K's (five_bits: at 48, plus 16 where bit j of
 * qh[l] at 16 is set), rearranged as the activations are: wq (64); then sub-block j's 6-bit scale
 * and minimum as a pair of equal words, wq[64 + j] and wq[72 + j] (vpdpwssd's broadcast operands),
 * taken out of their packed bits once, not again for every group of tokens. */
#define Q4K_WORDS 80
VNNI static void unpack_q4k(const uint8_t *blk, bool five_bits, uint32_t *wq) {
    for (int j = 0; j < 8; j++) {
        uint8_t scale, min;
        em_k4_scale_min(j, blk + 4, &scale, &min);
        wq[64 + j] = scale * 0x10001u;
        wq[72 + j] = min * 0x10001u;
    }
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i qh = five_bits ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : one;
    for (int i = 0; i < 4; i++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(blk + (five_bits ? 48 : 16) + 32 * i));
        __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(15)),
                hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15));
        if (five_bits) { /* bits 2i and 2i + 1 of each qh byte, as 16 */
            lo = _mm256_or_si256(
                lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i), one), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i + 1), one), 4));
        }
        _mm512_storeu_si512(wq + 16 * i,
                            lane_bytes(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)));
    }
}

/* One Q4_K block of `rows` rows (row r's at blk[r], its quants unpacked in wq[r])
 * against the rearranged activations yt (64) and ybs (8), each vector of yt loaded once for all
 * the rows. */
VNNI static inline __attribute__((always_inline)) void
q4k_blocks(int rows, const uint8_t *const blk[ROW_GROUP], const uint32_t *const wq[ROW_GROUP],
           const __m512i *yt, const __m512i *ybs, __m512 kd, ksums *s) {
    __m512i lane[ROW_GROUP][8];
    for (int r = 0; r < rows; r++)
        for (int l = 0; l < 8; l++) lane[r][l] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        __m512i sc[ROW_GROUP];
        for (int r = 0; r < rows; r++) sc[r] = _mm512_set1_epi32((int)wq[r][64 + j]);
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) {
            __m512i y = shared_vector(rows, &yt[8 * j + l]);
#pragma GCC unroll 2
            for (int r = 0; r < rows; r++) {
                __m512i p = _mm512_maddubs_epi16(_mm512_set1_epi32((int)wq[r][8 * j + l]), y);
                dpwssd_into(&lane[r][l], p, sc[r]);
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        __m512i summin = _mm512_setzero_si512();
        for (int i = 0; i < 8; i++)
            summin = _mm512_dpwssd_epi32(summin, ybs[i], _mm512_set1_epi32((int)wq[r][72 + i]));
        lane_steps(&s[r], em_ggml_half_at(blk[r]), kd, lane[r]);
        __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(em_ggml_half_at(blk[r] + 2)), kd);
        s[r].sumf = _mm512_sub_ps(s[r].sumf, _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summin)));
    }
}

/* The quants of one Q6_K or Q3_K block (at blk), times their scales, rearranged as the activations
 * are: wq (128). */
VNNI static void unpack_k16(em_ggml_dot_type type, const uint8_t *blk, uint32_t *wq) {
    __m512i words[8]; /* |.| <= 4096 */
    em_ggml_k_folded_words(type, blk, words);
    for (int v = 0; v < 8; v++) _mm512_storeu_si512(wq + 16 * v, lane_words(words[v]));
}

/* The same for one Q2_K block: its unsigned 2-bit quants (qs at 16, laid out as Q3_K's) times
 * the 4-bit scales (the low nibbles of bytes 0..15). */
VNNI static void unpack_q2k(const uint8_t *blk, uint32_t *wq) {
    const __m256i three = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i qs = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * h));
        for (int k = 0; k < 4; k++) { /* values 128 h + 32 k + l: sub-blocks j and j + 1 */
            int j = 8 * h + 2 * k;
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), three);
            __m512i sc = _mm512_inserti64x4(_mm512_set1_epi16(blk[j] & 15),
                                            _mm256_set1_epi16(blk[j + 1] & 15), 1);
            __m512i scaled = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(q), sc); /* <= 45 */
            _mm512_storeu_si512(wq + 8 * j, lane_words(scaled));
        }
    }
}

/* Exact sums of 128 rearranged weight words wq[r] of each of `rows` rows times Q6_K's activation
 * lanes yt (128), each vector of yt loaded once for all the rows, in `kept` accumulators a row:
 * sums[r][l % kept]. kept 8: the 8 lane sums of ggml_dot.h, for the types whose float step takes
 * each lane (Q6_K, Q3_K; rows 1 to PAIR). kept 2: two partial sums (even and odd l, two
 * dependency chains) for those whose step takes a block's whole sum (Q2_K, the lattice types), so
 * 8 rows fit the registers and share each load of yt: 9 loads for 8 products, where pairs of rows
 * keeping 8 lanes each took 3 for 2. */
VNNI static inline __attribute__((always_inline)) void
word_sums(int rows, int kept, const uint32_t *const wq[ROW_GROUP], const __m512i *yt,
          __m512i sums[ROW_GROUP][8]) {
    for (int r = 0; r < rows; r++)
        for (int l = 0; l < kept; l++) sums[r][l] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int j = 0; j < 16; j++)
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) {
            __m512i y = shared_vector(rows, &yt[8 * j + l]);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++)
                dpwssd_into(&sums[r][l % kept], _mm512_set1_epi32((int)wq[r][8 * j + l]), y);
        }
}

/* A block's exact sum total[r] for each of `rows` rows (1 to ROW_GROUP): word_sums kept in 2. */
VNNI static inline __attribute__((always_inline)) void
word_totals(int rows, const uint32_t *const wq[ROW_GROUP], const __m512i *yt,
            __m512i total[ROW_GROUP]) {
    __m512i sums[ROW_GROUP][8];
    word_sums(rows, 2, wq, yt, sums);
    for (int r = 0; r < rows; r++) total[r] = _mm512_add_epi32(sums[r][0], sums[r][1]);
}

/* One Q2_K block of `rows` rows (at blk[r], unpacked in wq[r]) against Q6_K's activation lanes yt
 * (128) and Q4_K's 16-value sums ybs (8): sumf += dall * isum - dmin * summs. */
VNNI static inline __attribute__((always_inline)) void
q2k_blocks(int rows, const uint8_t *const blk[ROW_GROUP], const uint32_t *const wq[ROW_GROUP],
           const __m512i *yt, const __m512i *ybs, __m512 kd, ksums *s) {
    __m512i total[ROW_GROUP], summs[ROW_GROUP];
    for (int r = 0; r < rows; r++) {
        summs[r] = _mm512_setzero_si512();
        for (int i = 0; i < 8; i++)
            summs[r] = _mm512_dpwssd_epi32(
                summs[r], ybs[i],
                _mm512_set1_epi32((blk[r][2 * i] >> 4) | (blk[r][2 * i + 1] >> 4) << 16));
    }
    word_totals(rows, wq, yt, total);
    for (int r = 0; r < rows; r++) {
        __m512i isum = total[r];
        __m512 dall = _mm512_mul_ps(kd, _mm512_set1_ps(em_ggml_half_at(blk[r] + 80))),
               dmin = _mm512_mul_ps(kd, _mm512_set1_ps(em_ggml_half_at(blk[r] + 82)));
        s[r].sumf = _mm512_add_ps(s[r].sumf,
                                  _mm512_sub_ps(_mm512_mul_ps(dall, _mm512_cvtepi32_ps(isum)),
                                                _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summs[r]))));
    }
}

/* One Q6_K block of `rows` rows (at blk[r], its quants unpacked in wq[r]), or Q3_K's (its d at
 * 108, not 208), against the rearranged activations yt (128). */
VNNI static inline __attribute__((always_inline)) void
q6k_blocks(int rows, const uint8_t *const blk[ROW_GROUP], int d_at,
           const uint32_t *const wq[ROW_GROUP], const __m512i *yt, __m512 kd, ksums *s) {
    __m512i lane[ROW_GROUP][8];
    word_sums(rows, 8, wq, yt, lane);
    for (int r = 0; r < rows; r++) lane_steps(&s[r], em_ggml_half_at(blk[r] + d_at), kd, lane[r]);
}

/* The values of one IQ4_XS block (at blk) plus 128 (unsigned), rearranged as the activations
 * are for Q4_K: wq (64). */
VNNI static void unpack_iq4xs(const uint8_t *blk, uint32_t *wq) {
    for (int i = 0; i < 4; i++) { /* sub-blocks 2 i and 2 i + 1 */
        const uint8_t *qs = blk + 8 + 32 * i;
        __m512i z = _mm512_inserti64x4(
            _mm512_castsi256_si512(em_ggml_nibble_values(em_iq4nl_values, em_ggml_nibbles(qs))),
            em_ggml_nibble_values(em_iq4nl_values, em_ggml_nibbles(qs + 16)), 1);
        z = _mm512_xor_si512(z, _mm512_set1_epi8((char)0x80));
        _mm512_storeu_si512(wq + 16 * i, lane_bytes(z));
    }
}

/* One IQ4_XS block of `rows` rows (at blk[r], unpacked in wq[r]) against Q4_K's activation lanes
 * yt (64) and 16-value sums ybs (8): per sub-block j, its exact sum (less 128 times the
 * activations' sum over it, for the values' shift), then sumf += (d4d8 * (scale_j - 32)) * sumi_j
 * in order. */
VNNI static inline __attribute__((always_inline)) void
iq4xs_blocks(int rows, const uint8_t *const blk[ROW_GROUP], const uint32_t *const wq[ROW_GROUP],
             const __m512i *yt, const __m512i *ybs, __m512 kd, ksums *s) {
    __m512 d4d8[ROW_GROUP];
    for (int r = 0; r < rows; r++)
        d4d8[r] = _mm512_mul_ps(_mm512_set1_ps(em_ggml_half_at(blk[r])), kd);
    for (int j = 0; j < 8; j++) {
        __m512i sumi[ROW_GROUP];
        for (int r = 0; r < rows; r++)
            sumi[r] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), ybs[j], _mm512_set1_epi16(-128));
        for (int l = 0; l < 8; l++) {
            __m512i y = yt[8 * j + l];
            for (int r = 0; r < rows; r++)
                sumi[r] = _mm512_dpbusd_epi32(sumi[r], _mm512_set1_epi32((int)wq[r][8 * j + l]), y);
        }
        for (int r = 0; r < rows; r++) {
            __m512 d = _mm512_mul_ps(d4d8[r], _mm512_set1_ps((float)em_iq4_xs_scale(blk[r], j)));
            s[r].sumf = _mm512_add_ps(s[r].sumf, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[r])));
        }
    }
}

/* A block of a type decoded to integers (at blk; ggml_dot_iq.h: the lattice IQ types, TQ1_0 and
 * TQ2_0) rearranged as Q6_K's words are: wq (128), and the IQ1 delta words at wq + 128. */
VNNI static void unpack_decoded(em_ggml_dot_type type, const uint8_t *blk, uint32_t *wq) {
    em_iq_decoded v;
    em_iq_decode(type, blk, &v);
    for (int j = 0; j < 16; j += 2) { /* 16-value sub-blocks j and j + 1 */
        _mm512_storeu_si512(wq + 8 * j, lane_words(_mm512_loadu_si512(v.w + 16 * j)));
        if (em_iq_has_delta(type))
            _mm512_storeu_si512(wq + 128 + 8 * j, lane_words(_mm512_loadu_si512(v.delta + 16 * j)));
    }
}

/* One such block of `rows` rows (at blk[r], unpacked in wq[r]) against Q6_K's lanes yt:
 * em_iq_step. */
VNNI static inline __attribute__((always_inline)) void
decoded_blocks(em_ggml_dot_type type, int rows, const uint8_t *const blk[ROW_GROUP],
               const uint32_t *const wq[ROW_GROUP], const __m512i *yt, __m512 kd, ksums *s) {
    __m512i total[ROW_GROUP], delta_total[ROW_GROUP];
    word_totals(rows, wq, yt, total);
    if (em_iq_has_delta(type)) {
        const uint32_t *delta[ROW_GROUP];
        for (int r = 0; r < rows; r++) delta[r] = wq[r] + 128;
        word_totals(rows, delta, yt, delta_total);
    }
    for (int r = 0; r < rows; r++) {
        __m512 d = _mm512_mul_ps(_mm512_set1_ps(em_iq_block_scale(type, blk[r])), kd);
        __m512 sum = _mm512_cvtepi32_ps(total[r]);
        if (em_iq_has_delta(type))
            sum = _mm512_add_ps(
                sum, _mm512_mul_ps(_mm512_set1_ps(0.125f), _mm512_cvtepi32_ps(delta_total[r])));
        s[r].sumf = _mm512_add_ps(s[r].sumf, _mm512_mul_ps(d, sum));
    }
}

/* The K-quant lanes of the group of tokens from c0 (see em_ggml_fill_k_lanes): its M vectors a
 * block (Q4_K: 64 and ybs 8; Q6_K: 128). */
static __m512i *k4_lanes_at(const em_q8_activations *x, int c0) {
    return (__m512i *)x->k4lanes + (size_t)(c0 / LANES) * (size_t)x->kblocks * 64;
}
static __m512i *k4_bsums_at(const em_q8_activations *x, int c0) {
    return (__m512i *)x->k4bsums + (size_t)(c0 / LANES) * (size_t)x->kblocks * 8;
}
static __m512i *k6_lanes_at(const em_q8_activations *x, int c0) {
    return (__m512i *)x->k6lanes + (size_t)(c0 / LANES) * (size_t)x->kblocks * 128;
}

void em_ggml_fill_k_lanes(em_q8_activations *x, bool q4k, bool q6k, int threads) {
    if (x->tokens <= EM_GGML_ROW_LANE_TOKENS) return; /* a decoding step's tiles read none */
    int groups = (x->tokens + LANES - 1) / LANES;
    bool parallel = (int64_t)x->tokens * x->kblocks * EM_Q8K_BLOCK >= EM_PARALLEL_MIN_ELEMENTS;
#pragma omp parallel for num_threads(threads) if (parallel)
    for (int g = 0; g < groups; g++) {
        int c0 = g * LANES, n = x->tokens - c0 < LANES ? x->tokens - c0 : LANES;
        if (q4k) rearrange_q8k(true, x, c0, n, k4_lanes_at(x, c0), k4_bsums_at(x, c0));
        if (q6k) rearrange_q8k(false, x, c0, n, k6_lanes_at(x, c0), NULL);
    }
}

/* The quants of one block of a tile's type (at blk), unpacked into wq for kquant_blocks. */
VNNI static inline __attribute__((always_inline)) void
unpack_kquant(em_ggml_dot_type type, const uint8_t *blk, uint32_t *wq) {
    if (em_ggml_dot_is_decoded(type))
        unpack_decoded(type, blk, wq);
    else if (type == EM_GGML_DOT_IQ4_XS)
        unpack_iq4xs(blk, wq);
    else if (type == EM_GGML_DOT_Q2_K)
        unpack_q2k(blk, wq);
    else if (type == EM_GGML_DOT_Q4_K || type == EM_GGML_DOT_Q5_K)
        unpack_q4k(blk, type == EM_GGML_DOT_Q5_K, wq);
    else
        unpack_k16(type, blk, wq);
}

/* One block of `rows` rows of a tile's type against the activations' lanes of that block (yt)
 * and, for the types that read them, its 16-value sums (ybs). */
VNNI static inline __attribute__((always_inline)) void
kquant_blocks(em_ggml_dot_type type, int rows, const uint8_t *const blk[ROW_GROUP],
              const uint32_t *const wq[ROW_GROUP], const __m512i *yt, const __m512i *ybs, __m512 kd,
              ksums *s) {
    if (em_ggml_dot_is_decoded(type))
        decoded_blocks(type, rows, blk, wq, yt, kd, s);
    else if (type == EM_GGML_DOT_IQ4_XS)
        iq4xs_blocks(rows, blk, wq, yt, ybs, kd, s);
    else if (type == EM_GGML_DOT_Q2_K)
        q2k_blocks(rows, blk, wq, yt, ybs, kd, s);
    else if (type == EM_GGML_DOT_Q4_K || type == EM_GGML_DOT_Q5_K)
        q4k_blocks(rows, blk, wq, yt, ybs, kd, s);
    else
        q6k_blocks(rows, blk, type == EM_GGML_DOT_Q3_K ? 108 : 208, wq, yt, kd, s);
}

/* A tile of Q6_K, Q3_K, Q4_K, Q5_K, Q2_K, IQ4_XS or lattice IQ rows (type: Q3_K is Q6_K with
 * another unpacking, Q5_K Q4_K; Q2_K reads Q6_K's lanes and Q4_K's 16-value sums, IQ4_XS Q4_K's
 * lanes and sums, the lattice types Q6_K's lanes, and their sums take their factor at the end).
 * Each block's quants are unpacked once, for the first group of tokens, and kept (Mw words a
 * block) for the others. Rows go in pairs (Q6_K's and Q3_K's, 8 lane sums a row) or in groups of
 * 8 (IQ4_XS's, Q2_K's and the lattice types', one sum a row), so that each activation vector
 * loaded serves two or eight rows' products, where one row alone takes a load of 64 bytes and a
 * broadcast for each. */
VNNI static inline __attribute__((always_inline)) void
kquant_tile(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int rows,
            const em_q8_activations *x, float *ct, size_t ldc) {
    const bool is_q4k = type == EM_GGML_DOT_Q4_K || type == EM_GGML_DOT_Q5_K ||
                        type == EM_GGML_DOT_IQ4_XS,
               reads_bsums = is_q4k || type == EM_GGML_DOT_Q2_K;
    /* M: activation vectors a block; Mw: unpacked weight dwords a block */
    const int M = is_q4k ? 64 : 128, Mw = em_iq_has_delta(type) ? 256
                                          : type == EM_GGML_DOT_Q4_K || type == EM_GGML_DOT_Q5_K
                                              ? Q4K_WORDS
                                              : M;
    const size_t block_bytes = em_ggml_dot_is_decoded(type) ? em_iq_block_bytes(type)
                               : type == EM_GGML_DOT_Q3_K   ? 110
                               : type == EM_GGML_DOT_Q2_K   ? 84
                               : type == EM_GGML_DOT_IQ4_XS ? 136
                               : type == EM_GGML_DOT_Q6_K   ? 210
                               : type == EM_GGML_DOT_Q5_K   ? 176
                                                            : 144;
    /* Q4_K's and Q5_K's rows go one at a time: their two instructions a product (vpmaddubsw, then
     * vpdpwssd by the scale) for two rows need more vector registers than there are, and GCC's
     * spills made pairs slower than single rows (Q4_K's square product 246 against 330 GFLOP/s on
     * the Xeon; 205 against 316 with vpdpbusd on the AMD EPYC) */
    const int group =
        type == EM_GGML_DOT_Q4_K || type == EM_GGML_DOT_Q5_K ? 1
        : type == EM_GGML_DOT_IQ4_XS || type == EM_GGML_DOT_Q2_K || em_ggml_dot_is_decoded(type)
            ? ROW_GROUP
            : PAIR;
    /* a row's chunk of blocks in cache lines (one more, as it may straddle one) */
    const size_t chunk_lines = ((size_t)KBLOCK_CHUNK * block_bytes + 63) / 64 + 1;
    ksums s[ROW_BATCH];
    uint32_t *unpacked = em_xmalloc((size_t)rows * x->kblocks * Mw * sizeof *unpacked);
    for (int c0 = 0; c0 < x->tokens; c0 += LANES) {
        int n = x->tokens - c0 < LANES ? x->tokens - c0 : LANES;
        for (int r0 = 0; r0 < rows; r0 += ROW_BATCH) {
            int batch = rows - r0 < ROW_BATCH ? rows - r0 : ROW_BATCH;
            for (int r = 0; r < batch; r++) {
                for (int l = 0; l < 8; l++) s[r].sums[l] = _mm512_setzero_ps();
                s[r].sumf = _mm512_setzero_ps();
            }
            const __m512i *yt = is_q4k ? k4_lanes_at(x, c0) : k6_lanes_at(x, c0),
                          *ybs = reads_bsums ? k4_bsums_at(x, c0) : NULL;
            for (int b0 = 0; b0 < x->kblocks; b0 += KBLOCK_CHUNK) {
                int nb = x->kblocks - b0 < KBLOCK_CHUNK ? x->kblocks - b0 : KBLOCK_CHUNK;
                for (int r = 0; r < batch; r += group) {
                    int pair = batch - r < group ? batch - r : group;
                    /* in the first group of tokens, which reads the weights from memory: each
                     * row's next chunk (after its last, the row a batch on), into L2 while these
                     * compute (a prefetch past the matrix never faults). Xeon,
                     * EVALMESH_CPU_KERNEL=avx512vnni, 16 sequences, the builds in turns: 110M
                     * Q4_K 541-553 -> 571-597 generated tokens/s, Q6_K 500-516 -> 513-526 */
                    for (int i = 0; c0 == 0 && i < pair; i++) {
                        size_t row = (size_t)(r0 + r + i);
                        const uint8_t *next =
                            b0 + nb < x->kblocks
                                ? w + row * row_bytes + (size_t)(b0 + nb) * block_bytes
                                : w + (row + (size_t)batch) * row_bytes;
                        for (size_t l = 0; l < chunk_lines; l++)
                            _mm_prefetch((const char *)next + 64 * l, _MM_HINT_T2);
                    }
                    for (int b = 0; b < nb; b++) {
                        const uint8_t *blk[ROW_GROUP];
                        const uint32_t *wq[ROW_GROUP];
                        for (int i = 0; i < pair; i++) {
                            size_t row = (size_t)(r0 + r + i), block = (size_t)(b0 + b);
                            uint32_t *u = unpacked + (row * x->kblocks + block) * Mw;
                            blk[i] = w + row * row_bytes + block * block_bytes;
                            if (c0 == 0) unpack_kquant(type, blk[i], u);
                            wq[i] = u;
                        }
                        __m512 kd = _mm512_maskz_loadu_ps(
                            em_ggml_live_lanes(n), x->kd + (size_t)(b0 + b) * x->tokens + c0);
                        const __m512i *block_yt = yt + (size_t)M * (b0 + b),
                                      *block_ybs = ybs ? ybs + 8 * (b0 + b) : NULL;
                        if (pair == group)
                            kquant_blocks(type, group, blk, wq, block_yt, block_ybs, kd, &s[r]);
                        else /* the tile's last rows, one at a time */
                            for (int i = 0; i < pair; i++)
                                kquant_blocks(type, 1, blk + i, wq + i, block_yt, block_ybs, kd,
                                              &s[r + i]);
                    }
                }
            }
            for (int r = 0; r < batch; r++) {
                for (int l = 0; l < 8; l++) s[r].sumf = _mm512_add_ps(s[r].sumf, s[r].sums[l]);
                if (em_ggml_dot_is_decoded(type))
                    s[r].sumf = _mm512_mul_ps(_mm512_set1_ps(em_iq_factor(type)), s[r].sumf);
                _mm512_mask_storeu_ps(ct + (size_t)(r0 + r) * ldc + c0, em_ggml_live_lanes(n),
                                      s[r].sumf);
            }
        }
    }
    free(unpacked);
}

/* A K-quant's tiles: 4 tokens or fewer take avx2's (rows across its lanes), the rest these. */
#define KQUANT_TILE(name, column)                                                                  \
    VNNI static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                     \
                                 const em_q8_activations *x, float *ct, size_t ldc) {              \
        if (x->tokens <= EM_GGML_ROW_LANE_TOKENS)                                                  \
            em_ggml_kernel_avx2.tile[column](w, row_bytes, rows, x, ct, ldc);                      \
        else                                                                                       \
            kquant_tile(column, w, row_bytes, rows, x, ct, ldc);                                   \
    }
EM_GGML_KQUANTS(KQUANT_TILE)
KQUANT_TILE(iq4_xs, EM_GGML_DOT_IQ4_XS)
EM_GGML_DECODED_TYPES(KQUANT_TILE)

static bool has_avx512vnni(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}

void em_ggml_fill_token_lanes(em_q8_activations *x, int threads) {
    if (x->tokens <= EM_GGML_ROW_LANE_TOKENS) return; /* a decoding step's tiles read none */
    int groups = (x->tokens + LANES - 1) / LANES;
    bool parallel = (int64_t)x->tokens * x->blocks * EM_Q8_BLOCK >= EM_PARALLEL_MIN_ELEMENTS;
#pragma omp parallel for num_threads(threads) if (parallel)
    for (int g = 0; g < groups; g++) fill_group(x, g);
}

const em_ggml_kernel em_ggml_kernel_avx512vnni = {
    .name = "avx512vnni",
    .runs_here = has_avx512vnni,
    .prepare = em_ggml_fill_token_lanes,
    .prepare_k = em_ggml_fill_k_lanes,
    .tile = {tile_q8_0, tile_q4_0, tile_q4_1, tile_q5_0, tile_q5_1, tile_q6_k, tile_q4_k, tile_q5_k,
             tile_q3_k, tile_q2_k, em_ggml_f16_tile_avx512, tile_iq4_nl, tile_iq4_xs,
             EM_GGML_DECODED_TYPES(EM_GGML_TILE_ENTRY)[EM_GGML_DOT_MXFP4] = tile_mxfp4},
};
#endif
