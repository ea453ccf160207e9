/* The `ggml` precision's AVX-VNNI kernel (see ggml_dot.h): the VEX-encoded 256-bit vpdpbusd of
 * CPUs that have it without AVX-512 (Alder Lake and later client cores, Zen 5), in the design of
 * the avx512vnni row with 8 token lanes per vector and no AVX-512 instruction. A chunk of up to 32
 * tokens, four groups of 8 (the last group may hold 4: T is rounded up to 4), has its activations
 * transposed once per chunk of blocks by an 8 x 8 dword transpose (vector k of a block: dword k,
 * activation values 4k .. 4k + 3, of each token of the group), so that a weight block's integer
 * products are 8 vpdpbusd per group of its unpacked quants' dword k, broadcast, against vector k:
 * unsigned quants times signed activations, 4 products per lane and step, exact 32-bit sums; the
 * groups share each block's unpacking and broadcasts (four groups: 151 GFLOP/s on Q8_0 on the
 * Xeon, against 132 with two). Signed Q8_0 quants are offset to unsigned (q + 128) and, like
 * Q4_0's and Q5_0's stored offsets, corrected by offset * sum(activations). The block's float
 * steps then run on the 8 (row, token) lanes of each group in the order of the C version, one IEEE
 * rounding each, so each lane gets the C result's bits; a row's sums pass through ct between chunks
 * of blocks (a stored float reloads exact). The K-quants have no column here (avx2's). With 4
 * tokens or fewer (a decoding step) the avx2 kernel's 8-row one-token tiles do better: such tiles
 * go there, with the same bits. */
#include "stages/kernels/cpu/ggml_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define AVXVNNI __attribute__((target("avxvnni,avx2,fma,f16c")))
#define LANES 8        /* tokens per vector */
#define GROUPS 4       /* vectors of tokens sharing a block's unpacked quants */
#define BLOCK_CHUNK 32 /* blocks whose transposed activations are on the stack at once */

AVXVNNI static inline float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 8 consecutive dwords or floats at p, or the first 4 and zeros when n is 4 (a group's live
 * tokens: 8 or 4). */
AVXVNNI static inline __m256i load_i32(const int32_t *p, int n) {
    return n == LANES ? _mm256_loadu_si256((const __m256i *)p)
                      : _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)p));
}
AVXVNNI static inline __m256 load_ps(const float *p, int n) {
    return n == LANES ? _mm256_loadu_ps(p) : _mm256_zextps128_ps256(_mm_loadu_ps(p));
}

/* yt[8 b + k] = dword k of block b0 + b of tokens c0 .. c0 + n - 1 (n = 8 or 4), lane t for token
 * c0 + t (zeros beyond n), for b < nb: the 8 tokens' blocks (256 consecutive bytes) as an 8 x 8
 * matrix of dwords, transposed. */
AVXVNNI static void token_lanes(const em_q8_activations *x, int c0, int n, int b0, int nb,
                                __m256i *yt) {
    for (int b = 0; b < nb; b++) {
        const int8_t *base = x->qs + ((size_t)(b0 + b) * x->tokens + c0) * EM_Q8_BLOCK;
        __m256i r[8];
        for (int t = 0; t < LANES; t++)
            r[t] = t < n ? _mm256_loadu_si256((const __m256i *)(base + EM_Q8_BLOCK * t))
                         : _mm256_setzero_si256();
        /* within each 128-bit half: a[2 i], a[2 i + 1] the dwords of tokens 2 i, 2 i + 1
         * interleaved; then q[4 h + k] dword k (low half) and k + 4 (high half) of tokens
         * 4 h .. 4 h + 3 */
        __m256i a[8], q[8];
        for (int i = 0; i < 4; i++) {
            a[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            a[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        for (int h = 0; h < 2; h++) {
            q[4 * h] = _mm256_unpacklo_epi64(a[4 * h], a[4 * h + 2]);
            q[4 * h + 1] = _mm256_unpackhi_epi64(a[4 * h], a[4 * h + 2]);
            q[4 * h + 2] = _mm256_unpacklo_epi64(a[4 * h + 1], a[4 * h + 3]);
            q[4 * h + 3] = _mm256_unpackhi_epi64(a[4 * h + 1], a[4 * h + 3]);
        }
        for (int k = 0; k < 4; k++) {
            yt[8 * b + k] = _mm256_permute2x128_si256(q[k], q[k + 4], 0x20);
            yt[8 * b + k + 4] = _mm256_permute2x128_si256(q[k], q[k + 4], 0x31);
        }
    }
}

/* The 32 quants of a block as unsigned bytes, value j in byte j: Q8_0's plus 128, the others'
 * nibbles with their fifth bits, the stored offset still in. */
AVXVNNI static inline __m256i block_quants(em_ggml_dot_type type, const uint8_t *blk) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    if (type == EM_GGML_DOT_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + L.qs)),
                                _mm256_set1_epi8((char)0x80));
    __m128i b = _mm_loadu_si128((const __m128i *)(blk + L.qs));
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
    if (L.qh) {
        uint32_t bits;
        memcpy(&bits, blk + L.qh, 4);
        /* byte j takes byte j / 8 of the bits, then tests bit j % 8: 0x10 where set */
        const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                 0x0101010101010101, 0x0000000000000000);
        __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
        __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    }
    return q;
}

/* Row w's blocks b0 .. b0 + nb - 1 times the chunk's transposed activations yt (group g's at
 * yt + 8 BLOCK_CHUNK g), G groups with n[g] live tokens starting at token c0 + 8 g, the sums of
 * earlier chunks (b0 > 0) read from out[8 g ..] and the row's sums there after. */
AVXVNNI static inline __attribute__((always_inline)) void
row_chunk(em_ggml_dot_type type, int G, const uint8_t *w, const em_q8_activations *x, int c0,
          const int n[GROUPS], int b0, int nb, const __m256i *yt, float *out) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    /* the offset subtracted from each unsigned quant: 128 (Q8_0 as shifted), 8, 16 or none */
    const int offset = type == EM_GGML_DOT_Q8_0 ? 128 : L.offset;
    const __m128i offset_shift = _mm_cvtsi32_si128(offset ? __builtin_ctz((unsigned)offset) : 0);
    __m256 acc[GROUPS];
    for (int g = 0; g < G; g++) acc[g] = b0 ? load_ps(out + LANES * g, n[g]) : _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)(b0 + b) * L.bytes;
        uint32_t q[8];
        _mm256_storeu_si256((__m256i *)q, block_quants(type, blk));
        __m256i sumi[GROUPS];
        for (int g = 0; g < G; g++) sumi[g] = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            __m256i qk = _mm256_set1_epi32((int)q[k]);
            for (int g = 0; g < G; g++)
                sumi[g] = _mm256_dpbusd_avx_epi32(sumi[g], qk, yt[BLOCK_CHUNK * 8 * g + 8 * b + k]);
        }
        __m256 dw = _mm256_set1_ps(half_at(blk));
        __m256 mw = _mm256_setzero_ps();
        if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1)
            mw = _mm256_set1_ps(half_at(blk + L.m));
        for (int g = 0; g < G; g++) {
            size_t at = (size_t)(b0 + b) * x->tokens + c0 + LANES * g;
            if (offset)
                sumi[g] = _mm256_sub_epi32(
                    sumi[g], _mm256_sll_epi32(load_i32(x->sum + at, n[g]), offset_shift));
            __m256 fsum = _mm256_cvtepi32_ps(sumi[g]);
            __m256 dx = load_ps(x->d + at, n[g]);
            __m256 step;
            if (type == EM_GGML_DOT_Q8_0) {
                step = _mm256_mul_ps(fsum, _mm256_mul_ps(dw, dx));
            } else if (type == EM_GGML_DOT_Q4_0) {
                step = _mm256_mul_ps(_mm256_mul_ps(fsum, dw), dx);
            } else {
                step = _mm256_mul_ps(_mm256_mul_ps(dw, dx), fsum);
            }
            if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1)
                step = _mm256_add_ps(step, _mm256_mul_ps(mw, load_ps(x->s + at, n[g])));
            acc[g] = _mm256_add_ps(acc[g], step);
        }
    }
    for (int g = 0; g < G; g++) {
        if (n[g] == LANES)
            _mm256_storeu_ps(out + LANES * g, acc[g]);
        else
            _mm_storeu_ps(out + LANES * g, _mm256_castps256_ps128(acc[g]));
    }
}

/* Tokens pass in chunks of 32 (four groups of 8; the last chunk's groups of 8 or 4, fewer of
 * them); per chunk of blocks, the groups are transposed once and every row passes over them, its
 * row_chunk made for the chunk's number of groups (their vectors stay in registers). */
AVXVNNI static inline __attribute__((always_inline)) void tile(em_ggml_dot_type type,
                                                               const uint8_t *w, size_t row_bytes,
                                                               int rows, const em_q8_activations *x,
                                                               float *ct, size_t ldc) {
    if (x->tokens <= 4) {
        em_ggml_kernel_avx2.tile[type](w, row_bytes, rows, x, ct, ldc);
        return;
    }
    __m256i yt[GROUPS * 8 * BLOCK_CHUNK];
    for (int c0 = 0; c0 < x->tokens; c0 += GROUPS * LANES) {
        int n[GROUPS] = {0}, G = 0;
        for (; G < GROUPS && c0 + LANES * G < x->tokens; G++) {
            int left = x->tokens - c0 - LANES * G;
            n[G] = left < LANES ? left : LANES;
        }
        for (int b0 = 0; b0 < x->blocks; b0 += BLOCK_CHUNK) {
            int nb = x->blocks - b0 < BLOCK_CHUNK ? x->blocks - b0 : BLOCK_CHUNK;
            for (int g = 0; g < G; g++)
                token_lanes(x, c0 + LANES * g, n[g], b0, nb, yt + BLOCK_CHUNK * 8 * g);
            for (int j = 0; j < rows; j++) {
                const uint8_t *wj = w + (size_t)j * row_bytes;
                float *out = ct + (size_t)j * ldc + c0;
                if (G == 4)
                    row_chunk(type, 4, wj, x, c0, n, b0, nb, yt, out);
                else if (G == 3)
                    row_chunk(type, 3, wj, x, c0, n, b0, nb, yt, out);
                else if (G == 2)
                    row_chunk(type, 2, wj, x, c0, n, b0, nb, yt, out);
                else
                    row_chunk(type, 1, wj, x, c0, n, b0, nb, yt, out);
            }
        }
    }
}

#define VNNI_TILE(name, column)                                                                    \
    AVXVNNI static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                  \
                                    const em_q8_activations *x, float *ct, size_t ldc) {           \
        tile(column, w, row_bytes, rows, x, ct, ldc);                                              \
    }
VNNI_TILE(q8_0, EM_GGML_DOT_Q8_0)
VNNI_TILE(q4_0, EM_GGML_DOT_Q4_0)
VNNI_TILE(q4_1, EM_GGML_DOT_Q4_1)
VNNI_TILE(q5_0, EM_GGML_DOT_Q5_0)
VNNI_TILE(q5_1, EM_GGML_DOT_Q5_1)

static bool has_avxvnni(void) {
    return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

const em_ggml_kernel em_ggml_kernel_avxvnni = {
    .name = "avxvnni",
    .runs_here = has_avxvnni,
    .tile = {tile_q8_0, tile_q4_0, tile_q4_1, tile_q5_0, tile_q5_1, NULL, NULL},
};
#endif
