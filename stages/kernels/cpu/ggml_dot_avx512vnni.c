/* The `ggml` precision's AVX512-VNNI kernel (see ggml_dot.h): the 16 lanes of a vector are 16
 * tokens of one weight row. A group of 16 tokens' activations is transposed once per chunk of
 * blocks (vector k of a block: dword k, activation values 4k .. 4k + 3, of each token), so that a
 * weight block's integer products are 8 vpdpbusd of its unpacked quants' dword k, broadcast,
 * against vector k: unsigned quants times signed activations, 4 products per lane and step, exact
 * 32-bit sums. Signed Q8_0 quants are offset to unsigned (q + 128) and, like Q4_0's and Q5_0's
 * stored offsets, corrected by offset * sum(activations). The block's float steps then run on the
 * 16 (row, token) lanes in the order of the C version, one IEEE rounding each, so each lane gets
 * the C result's bits; a row's sums pass through ct between chunks of blocks (a stored float
 * reloads exact). The K-quants' lanes are tokens too: one vector per integer lane l of ggml_dot.h.
 * With 4 tokens or fewer (a decoding step) 12 of 16 lanes would idle: those tiles go to the avx2
 * kernel, whose 8-row tiles have the same bits. */
#include "stages/kernels/cpu/ggml_dot.h"

#include "stages/formats/dequantize_rows.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define LANES 16       /* tokens per vector */
#define BLOCK_CHUNK 64 /* blocks whose transposed activations are on the stack at once */

VNNI static inline float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* The lanes live in a group of n tokens (n <= 16). */
static inline __mmask16 live_lanes(int n) {
    return (__mmask16)((1u << n) - 1u);
}

/* yt[8 b + k] = dword k of block b0 + b of tokens c0 .. c0 + n - 1, lane t for token c0 + t
 * (zeros beyond n), for b < nb. */
VNNI static void transpose_q8(const em_q8_activations *x, int c0, int n, int b0, int nb,
                              __m512i *yt) {
    const __m512i token_at = _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96,
                                               104, 112, 120); /* dwords */
    for (int b = 0; b < nb; b++) {
        const int8_t *base = x->qs + ((size_t)(b0 + b) * x->tokens + c0) * EM_Q8_BLOCK;
        for (int k = 0; k < 8; k++)
            yt[8 * b + k] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live_lanes(n),
                                                        token_at, base + 4 * k, 4);
    }
}

/* The 32 quants of a block as unsigned bytes, value j in byte j: Q8_0's plus 128, the others'
 * nibbles with their fifth bits (the stored offsets stay in). */
VNNI static inline __m256i unsigned_quants(em_ggml_dot_type type, const uint8_t *blk) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    if (type == EM_GGML_DOT_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + L.qs)),
                                _mm256_set1_epi8((char)0x80));
    __m128i b = _mm_loadu_si128((const __m128i *)(blk + L.qs));
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
    if (L.qh) {
        uint32_t bits;
        memcpy(&bits, blk + L.qh, 4);
        /* byte j: bit j of the 32 as 0x10 */
        __mmask32 set = (__mmask32)bits;
        q = _mm256_or_si256(q, _mm256_maskz_mov_epi8(set, _mm256_set1_epi8(0x10)));
    }
    return q;
}

/* Row w's blocks b0 .. b0 + nb - 1 times the group's transposed activations yt, the sums of
 * earlier chunks (b0 > 0) read from out[0 .. n - 1] and the row's sums there after. */
VNNI static inline __attribute__((always_inline)) void
row_chunk(em_ggml_dot_type type, const uint8_t *w, const em_q8_activations *x, int c0, int n,
          int b0, int nb, const __m512i *yt, float *out) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    const __mmask16 live = live_lanes(n);
    /* the offset subtracted from each unsigned quant: 128 (Q8_0 as shifted), 8, 16 or none */
    const int offset = type == EM_GGML_DOT_Q8_0 ? 128 : L.offset;
    const int offset_shift = offset ? __builtin_ctz((unsigned)offset) : 0;
    __m512 acc = b0 ? _mm512_maskz_loadu_ps(live, out) : _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * L.bytes;
        uint32_t q[8];
        _mm256_storeu_si256((__m256i *)q, unsigned_quants(type, blk));
        __m512i sumi = _mm512_setzero_si512();
        for (int k = 0; k < 8; k++)
            sumi = _mm512_dpbusd_epi32(sumi, _mm512_set1_epi32((int)q[k]), yt[8 * b + k]);
        size_t at = (size_t)(b0 + b) * x->tokens + c0;
        if (offset)
            sumi = _mm512_sub_epi32(
                sumi, _mm512_slli_epi32(_mm512_maskz_loadu_epi32(live, x->sum + at), offset_shift));
        __m512 fsum = _mm512_cvtepi32_ps(sumi);
        __m512 dw = _mm512_set1_ps(half_at(blk)), dx = _mm512_maskz_loadu_ps(live, x->d + at);
        __m512 step;
        if (type == EM_GGML_DOT_Q8_0) {
            step = _mm512_mul_ps(fsum, _mm512_mul_ps(dw, dx));
        } else if (type == EM_GGML_DOT_Q4_0) {
            step = _mm512_mul_ps(_mm512_mul_ps(fsum, dw), dx);
        } else {
            step = _mm512_mul_ps(_mm512_mul_ps(dw, dx), fsum);
        }
        if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1) {
            __m512 mw = _mm512_set1_ps(half_at(blk + L.m)),
                   sx = _mm512_maskz_loadu_ps(live, x->s + at);
            step = _mm512_add_ps(step, _mm512_mul_ps(mw, sx));
        }
        acc = _mm512_add_ps(acc, step);
    }
    _mm512_mask_storeu_ps(out, live, acc);
}

#define VNNI_TILE(name, column)                                                                    \
    VNNI static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                     \
                                 const em_q8_activations *x, float *ct, size_t ldc) {              \
        const em_ggml_dot_type type = column;                                                      \
        if (x->tokens <= 4) {                                                                      \
            em_ggml_kernel_avx2.tile[type](w, row_bytes, rows, x, ct, ldc);                        \
            return;                                                                                \
        }                                                                                          \
        __m512i yt[8 * BLOCK_CHUNK];                                                               \
        for (int c0 = 0; c0 < x->tokens; c0 += LANES) {                                            \
            int n = x->tokens - c0 < LANES ? x->tokens - c0 : LANES;                               \
            for (int b0 = 0; b0 < x->blocks; b0 += BLOCK_CHUNK) {                                  \
                int nb = x->blocks - b0 < BLOCK_CHUNK ? x->blocks - b0 : BLOCK_CHUNK;              \
                transpose_q8(x, c0, n, b0, nb, yt);                                                \
                for (int j = 0; j < rows; j++)                                                     \
                    row_chunk(type, w + (size_t)j * row_bytes, x, c0, n, b0, nb, yt,               \
                              ct + (size_t)j * ldc + c0);                                          \
            }                                                                                      \
        }                                                                                          \
    }
VNNI_TILE(q8_0, EM_GGML_DOT_Q8_0)
VNNI_TILE(q4_0, EM_GGML_DOT_Q4_0)
VNNI_TILE(q4_1, EM_GGML_DOT_Q4_1)
VNNI_TILE(q5_0, EM_GGML_DOT_Q5_0)
VNNI_TILE(q5_1, EM_GGML_DOT_Q5_1)

/* The K-quants run the avx2 kernel's tiles (same bits). */
static void tile_q6_k(const uint8_t *w, size_t row_bytes, int rows, const em_q8_activations *x,
                      float *ct, size_t ldc) {
    em_ggml_kernel_avx2.tile[EM_GGML_DOT_Q6_K](w, row_bytes, rows, x, ct, ldc);
}

static void tile_q4_k(const uint8_t *w, size_t row_bytes, int rows, const em_q8_activations *x,
                      float *ct, size_t ldc) {
    em_ggml_kernel_avx2.tile[EM_GGML_DOT_Q4_K](w, row_bytes, rows, x, ct, ldc);
}

static bool has_avx512vnni(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}

const em_ggml_kernel em_ggml_kernel_avx512vnni = {
    .name = "avx512vnni",
    .runs_here = has_avx512vnni,
    .tile = {tile_q8_0, tile_q4_0, tile_q4_1, tile_q5_0, tile_q5_1, tile_q6_k, tile_q4_k},
};
#endif
