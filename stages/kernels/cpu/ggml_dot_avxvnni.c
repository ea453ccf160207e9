/* The `ggml` precision's AVX-VNNI kernel (see ggml_dot.h): the VEX-encoded 256-bit vpdpbusd of
 * CPUs that have it without AVX-512 (Alder Lake and later client cores, Zen 5), in the design of
 * the avx512vnni row with 8 token lanes per vector and no AVX-512 instruction. A chunk of up to 32
 * tokens, four groups of 8 (the last group may hold 4: T is rounded up to 4), has its activations
 * transposed once per chunk of blocks by an 8 x 8 dword transpose (vector k of a block: dword k,
 * activation values 4k .. 4k + 3, of each token of the group), so that a weight block's integer
 * products are 8 vpdpbusd per group of its unpacked quants' dword k, broadcast, against vector k:
 * unsigned quants times signed activations, 4 products per lane and step, exact 32-bit sums; the
 * groups share each block's unpacking and broadcasts (four groups: 151 GFLOP/s on Q8_0 on the
 * Xeon, against 132 with two). Signed Q8_0, IQ4_NL and MXFP4 quants are offset to unsigned
 * (q + 128) and, like
 * Q4_0's and Q5_0's stored offsets, corrected by offset * sum(activations). The block's float
 * steps then run on the 8 (row, token) lanes of each group in the order of the C version, one IEEE
 * rounding each, so each lane gets the C result's bits; a row's sums pass through ct between chunks
 * of blocks (a stored float reloads exact). The K-quants' lanes are tokens too (see below). With 4
 * tokens or fewer (a decoding step) the avx2 kernel's 8-row one-token tiles do better: such tiles
 * go there, with the same bits. */
#include "stages/kernels/cpu/ggml_dot.h"

#include "stages/formats/dequantize_rows.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define AVXVNNI __attribute__((target("avxvnni,avx2,fma,f16c")))
#define LANES 8        /* tokens per vector */
#define GROUPS 4       /* vectors of tokens sharing a block's unpacked quants */
#define BLOCK_CHUNK 32 /* blocks whose transposed activations are on the stack at once */
#define AHEAD 2        /* rows on, the chunk a decoding step asks for (1: 559-576, 4: 561-573) */

AVXVNNI static inline float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* A 32-value block's scale: its fp16 d, or MXFP4's E8M0 exponent halved. */
AVXVNNI static inline float scale_at(em_ggml_dot_type type, const uint8_t *blk) {
    return em_ggml_block_layout_of(type).e8m0 ? em_e8m0_half(blk[0]) : half_at(blk);
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

/* out[k] = dword k of each of r[0 .. 7], lane t from r[t]: an 8 x 8 dword transpose. */
AVXVNNI static inline void transpose8(const __m256i r[8], __m256i *out) {
    /* within each 128-bit half: a[2 i], a[2 i + 1] the dwords of r[2 i], r[2 i + 1] interleaved;
     * then q[4 h + k] dword k (low half) and k + 4 (high half) of r[4 h .. 4 h + 3] */
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
        out[k] = _mm256_permute2x128_si256(q[k], q[k + 4], 0x20);
        out[k + 4] = _mm256_permute2x128_si256(q[k], q[k + 4], 0x31);
    }
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
        transpose8(r, yt + 8 * b);
    }
}

/* The 32 quants of a block as unsigned bytes, value j in byte j: Q8_0's and the values of IQ4_NL's
 * and MXFP4's nibbles plus 128, the others' nibbles with their fifth bits, the stored offset still
 * in. */
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
    if (L.values) {
        __m128i table = _mm_loadu_si128((const __m128i *)L.values);
        q = _mm256_xor_si256(_mm256_shuffle_epi8(_mm256_set_m128i(table, table), q),
                             _mm256_set1_epi8((char)0x80));
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
    /* the offset subtracted from each unsigned quant: 128 (signed quants as shifted), 8, 16 or
     * none */
    const int offset = em_ggml_signed_quants(type) ? 128 : L.offset;
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
        __m256 dw = _mm256_set1_ps(scale_at(type, blk));
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
            /* a row's chunk in cache lines (one more, as it may straddle one) */
            const size_t block_bytes = em_ggml_block_layout_of(type).bytes,
                         chunk_lines = ((size_t)nb * block_bytes + 63) / 64 + 1;
            for (int j = 0; j < rows; j++) {
                const uint8_t *wj = w + (size_t)j * row_bytes;
                float *out = ct + (size_t)j * ldc + c0;
                /* one pass of tokens (a decoding step of 5 to 32 sequences) meets each block
                 * once: the chunk AHEAD rows on is asked for into L2 while this row computes (a
                 * prefetch past the matrix never faults). Xeon, EVALMESH_CPU_KERNEL=avxvnni, 110M
                 * Q8_0, 16 sequences, the builds in turns: 502-516 -> 572-582 tokens/s */
                if (x->tokens <= GROUPS * LANES) {
                    const char *next =
                        (const char *)(wj + AHEAD * row_bytes + (size_t)b0 * block_bytes);
                    for (size_t l = 0; l < chunk_lines; l++)
                        _mm_prefetch(next + 64 * l, _MM_HINT_T2);
                }
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
VNNI_TILE(iq4_nl, EM_GGML_DOT_IQ4_NL)
VNNI_TILE(mxfp4, EM_GGML_DOT_MXFP4)

/* The K-quants Q6_K and Q4_K (ggml_dot.h, ggml_dot.c; Q5_K is avx2's), as the avx512vnni row does
 * them: a vector per integer lane l, its 8 lanes the tokens of a group, two groups sharing each
 * row's unpacked block. Both the weights' and the activations' sub-blocks are rearranged so that
 * dword l of a sub-block holds its values of lane l: Q4_K's 32-value sub-block values l, l + 8, l +
 * 16, l + 24 as bytes (vpdpbusd sums them exactly; then vpdpwssd adds that times the 6-bit scale
 * into lane l: the sum is below 2^15); Q6_K's 16-value sub-block values l and l + 8 as 16-bit
 * words, the weight's already times its scale (vpdpwssd adds both products into lane l). Q4_K's
 * minima multiply the activations' 16-value sums, paired in dwords as the minima are. The float
 * steps are the C version's per (row, token): sums[l] += d * lane_l per block, Q4_K's sumf -= dmin
 * * summin, at the end sumf += sums[0] ... sums[7]. A batch of rows keeps those sums while chunks
 * of blocks pass. */
#define KGROUPS 2      /* groups of 8 tokens sharing a row's unpacked block */
#define KBLOCK_CHUNK 4 /* blocks whose rearranged activations are on the stack at once */
#define ROW_BATCH 48   /* rows sharing one rearrangement of a chunk: a whole matmul tile */

/* Within 128 bits: bytes l and l + 8 side by side as word l. */
static const int8_t pair_bytes[32] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
                                      0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};

/* A 16-value sub-block of words with dword l holding its values l and l + 8. */
AVXVNNI static inline __m256i lane_words(__m256i z) {
    __m128i lo = _mm256_castsi256_si128(z), hi = _mm256_extracti128_si256(z, 1);
    return _mm256_set_m128i(_mm_unpackhi_epi16(lo, hi), _mm_unpacklo_epi16(lo, hi));
}

/* A 32-value sub-block of bytes with dword l holding its values l, l + 8, l + 16, l + 24. */
AVXVNNI static inline __m256i lane_bytes(__m256i z) {
    return lane_words(_mm256_shuffle_epi8(z, _mm256_loadu_si256((const __m256i *)pair_bytes)));
}

/* yt[M b + m] = dword m of the rearranged activations of block b0 + b (M = 64 for Q4_K, sub-block
 * j's lane l at m = 8 j + l; M = 128 for Q6_K, likewise over its 16 sub-blocks), lane t for token
 * c0 + t (zeros beyond n, 8 or 4), for b < nb; Q4_K also ybs[8 b + i] = the 16-value sums 2 i and
 * 2 i + 1 as a dword. */
AVXVNNI static void rearrange_q8k(bool is_q4k, const em_q8_activations *x, int c0, int n, int b0,
                                  int nb, __m256i *yt, __m256i *ybs) {
    const int M = is_q4k ? 64 : 128;
    __m256i rt[LANES][16]; /* per token, the rearranged block: 8 dwords per sub-block */
    for (int b = 0; b < nb; b++) {
        size_t at = (size_t)(b0 + b) * x->tokens + c0;
        for (int t = 0; t < LANES; t++) {
            const int8_t *y = x->kqs + (at + t) * EM_Q8K_BLOCK;
            for (int j = 0; j < M / 8; j++)
                rt[t][j] = t >= n   ? _mm256_setzero_si256()
                           : is_q4k ? lane_bytes(_mm256_loadu_si256((const __m256i *)(y + 32 * j)))
                                    : lane_words(_mm256_cvtepi8_epi16(
                                          _mm_loadu_si128((const __m128i *)(y + 16 * j))));
        }
        for (int j = 0; j < M / 8; j++) {
            __m256i r[LANES];
            for (int t = 0; t < LANES; t++) r[t] = rt[t][j];
            transpose8(r, yt + M * b + 8 * j);
        }
        if (is_q4k) {
            __m256i r[LANES];
            for (int t = 0; t < LANES; t++)
                r[t] = t < n ? _mm256_loadu_si256((const __m256i *)(x->kbsums + (at + t) * 16))
                             : _mm256_setzero_si256();
            transpose8(r, ybs + 8 * b);
        }
    }
}

/* One row's float sums over a chunk's groups (ggml_dot.c's sums[8] and sumf). */
typedef struct ksums {
    __m256 sums[KGROUPS][8], sumf[KGROUPS];
} ksums;

/* acc += vpdpwssd(a, b) in acc's register, VEX-encoded (AVX-VNNI): the intrinsic made GCC copy
 * the lane to a fresh register and back around each product. */
AVXVNNI static inline __attribute__((always_inline)) void dpwssd_into(__m256i *acc, __m256i a,
                                                                      __m256i b) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(*acc) : "x"(a), "x"(b));
}

/* Lane l's sum of a block over the sub-blocks j (weights wq[8 j + l], scales sc[j] as two equal
 * words for Q4_K: vpmaddubsw's two pair sums of a dword, each below 2^13, times the scale) against
 * group g's rearranged activations yt[g], then its float step sums[l] += (dw * kd) * (float)lane_l,
 * for the G groups. */
AVXVNNI static inline __attribute__((always_inline)) void
kquant_lanes(bool is_q4k, int G, const uint32_t *wq, const uint8_t *sc, float dw,
             const __m256i *const yt[KGROUPS], const __m256 kd[KGROUPS], ksums *s) {
    const int subblocks = is_q4k ? 8 : 16;
    __m256 d[KGROUPS];
    for (int g = 0; g < G; g++) d[g] = _mm256_mul_ps(_mm256_set1_ps(dw), kd[g]);
    for (int l = 0; l < 8; l++) {
        __m256i lane[KGROUPS];
        for (int g = 0; g < G; g++) lane[g] = _mm256_setzero_si256();
        for (int j = 0; j < subblocks; j++) {
            __m256i w = _mm256_set1_epi32((int)wq[8 * j + l]);
            if (is_q4k) {
                __m256i scale = _mm256_set1_epi16(sc[j]);
                for (int g = 0; g < G; g++)
                    dpwssd_into(&lane[g], _mm256_maddubs_epi16(w, yt[g][8 * j + l]), scale);
            } else {
                for (int g = 0; g < G; g++) dpwssd_into(&lane[g], w, yt[g][8 * j + l]);
            }
        }
        for (int g = 0; g < G; g++)
            s->sums[g][l] =
                _mm256_add_ps(s->sums[g][l], _mm256_mul_ps(d[g], _mm256_cvtepi32_ps(lane[g])));
    }
}

/* One Q4_K block (at blk) of a row against the groups' rearranged activations yt (64 each) and
 * ybs (8 each). */
AVXVNNI static inline __attribute__((always_inline)) void
q4k_block(int G, const uint8_t *blk, const __m256i *const yt[KGROUPS],
          const __m256i *const ybs[KGROUPS], const __m256 kd[KGROUPS], ksums *s) {
    uint32_t wq[64];
    for (int i = 0; i < 4; i++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * i));
        __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(15)),
                hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15));
        _mm256_storeu_si256((__m256i *)(wq + 16 * i), lane_bytes(lo));
        _mm256_storeu_si256((__m256i *)(wq + 16 * i + 8), lane_bytes(hi));
    }
    uint8_t scale[8], min[8];
    for (int j = 0; j < 8; j++) em_k4_scale_min(j, blk + 4, &scale[j], &min[j]);
    kquant_lanes(true, G, wq, scale, half_at(blk), yt, kd, s);
    __m256 dmin = _mm256_set1_ps(half_at(blk + 2));
    for (int g = 0; g < G; g++) {
        __m256i summin = _mm256_setzero_si256();
        for (int i = 0; i < 8; i++)
            summin =
                _mm256_dpwssd_avx_epi32(summin, ybs[g][i], _mm256_set1_epi32(min[i] * 0x10001));
        s->sumf[g] = _mm256_sub_ps(
            s->sumf[g], _mm256_mul_ps(_mm256_mul_ps(dmin, kd[g]), _mm256_cvtepi32_ps(summin)));
    }
}

/* One Q6_K block (at blk) of a row against the groups' rearranged activations yt (128 each). */
AVXVNNI static inline __attribute__((always_inline)) void
q6k_block(int G, const uint8_t *blk, const __m256i *const yt[KGROUPS], const __m256 kd[KGROUPS],
          ksums *s) {
    uint32_t wq[128];
    const __m256i low = _mm256_set1_epi8(15), two = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
        __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
        __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
        /* values 128 h + 32 k + l, l < 32: sub-blocks 8 h + 2 k and 8 h + 2 k + 1 */
        __m256i hi[4] = {_mm256_and_si256(_mm256_slli_epi16(qh, 4), two),
                         _mm256_and_si256(_mm256_slli_epi16(qh, 2), two), _mm256_and_si256(qh, two),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), two)};
        __m256i lo[4] = {_mm256_and_si256(ql0, low), _mm256_and_si256(ql1, low),
                         _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low),
                         _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low)};
        for (int k = 0; k < 4; k++) {
            int j = 8 * h + 2 * k;
            __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo[k], hi[k]), _mm256_set1_epi8(32));
            for (int half = 0; half < 2; half++) {
                __m128i q16 = half ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
                __m256i scaled = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(q16),
                                                    _mm256_set1_epi16((int8_t)blk[192 + j + half]));
                /* |.| <= 4096 */
                _mm256_storeu_si256((__m256i *)(wq + 8 * (j + half)), lane_words(scaled));
            }
        }
    }
    kquant_lanes(false, G, wq, NULL, half_at(blk + 208), yt, kd, s);
}

/* A tile of Q6_K or Q4_K rows (is_q4k), tokens in chunks of 16 (two groups of 8, the last of 8
 * or 4, or one group). */
AVXVNNI static inline __attribute__((always_inline)) void kquant_tile(bool is_q4k, const uint8_t *w,
                                                                      size_t row_bytes, int rows,
                                                                      const em_q8_activations *x,
                                                                      float *ct, size_t ldc) {
    const int M = is_q4k ? 64 : 128, block_bytes = is_q4k ? 144 : 210;
    __m256i yt[KGROUPS][128 * KBLOCK_CHUNK], ybs[KGROUPS][8 * KBLOCK_CHUNK];
    ksums s[ROW_BATCH];
    for (int c0 = 0; c0 < x->tokens; c0 += KGROUPS * LANES) {
        int n[KGROUPS] = {0}, G = 0;
        for (; G < KGROUPS && c0 + LANES * G < x->tokens; G++) {
            int left = x->tokens - c0 - LANES * G;
            n[G] = left < LANES ? left : LANES;
        }
        for (int r0 = 0; r0 < rows; r0 += ROW_BATCH) {
            int batch = rows - r0 < ROW_BATCH ? rows - r0 : ROW_BATCH;
            for (int r = 0; r < batch; r++) {
                for (int g = 0; g < G; g++) {
                    for (int l = 0; l < 8; l++) s[r].sums[g][l] = _mm256_setzero_ps();
                    s[r].sumf[g] = _mm256_setzero_ps();
                }
            }
            for (int b0 = 0; b0 < x->kblocks; b0 += KBLOCK_CHUNK) {
                int nb = x->kblocks - b0 < KBLOCK_CHUNK ? x->kblocks - b0 : KBLOCK_CHUNK;
                for (int g = 0; g < G; g++)
                    rearrange_q8k(is_q4k, x, c0 + LANES * g, n[g], b0, nb, yt[g], ybs[g]);
                for (int b = 0; b < nb; b++) {
                    const __m256i *ytb[KGROUPS], *ybsb[KGROUPS];
                    __m256 kd[KGROUPS];
                    for (int g = 0; g < KGROUPS; g++) {
                        ytb[g] = yt[g] + M * b, ybsb[g] = ybs[g] + 8 * b;
                        kd[g] = g < G
                                    ? load_ps(x->kd + (size_t)(b0 + b) * x->tokens + c0 + LANES * g,
                                              n[g])
                                    : _mm256_setzero_ps();
                    }
                    for (int r = 0; r < batch; r++) {
                        const uint8_t *blk =
                            w + (size_t)(r0 + r) * row_bytes + (size_t)(b0 + b) * block_bytes;
                        if (is_q4k && G == KGROUPS)
                            q4k_block(KGROUPS, blk, ytb, ybsb, kd, &s[r]);
                        else if (is_q4k)
                            q4k_block(1, blk, ytb, ybsb, kd, &s[r]);
                        else if (G == KGROUPS)
                            q6k_block(KGROUPS, blk, ytb, kd, &s[r]);
                        else
                            q6k_block(1, blk, ytb, kd, &s[r]);
                    }
                }
            }
            for (int r = 0; r < batch; r++) {
                for (int g = 0; g < G; g++) {
                    __m256 sumf = s[r].sumf[g];
                    for (int l = 0; l < 8; l++) sumf = _mm256_add_ps(sumf, s[r].sums[g][l]);
                    float *out = ct + (size_t)(r0 + r) * ldc + c0 + LANES * g;
                    if (n[g] == LANES)
                        _mm256_storeu_ps(out, sumf);
                    else
                        _mm_storeu_ps(out, _mm256_castps256_ps128(sumf));
                }
            }
        }
    }
}

AVXVNNI static void tile_q6_k(const uint8_t *w, size_t row_bytes, int rows,
                              const em_q8_activations *x, float *ct, size_t ldc) {
    if (x->tokens <= 4)
        em_ggml_kernel_avx2.tile[EM_GGML_DOT_Q6_K](w, row_bytes, rows, x, ct, ldc);
    else
        kquant_tile(false, w, row_bytes, rows, x, ct, ldc);
}

AVXVNNI static void tile_q4_k(const uint8_t *w, size_t row_bytes, int rows,
                              const em_q8_activations *x, float *ct, size_t ldc) {
    if (x->tokens <= 4)
        em_ggml_kernel_avx2.tile[EM_GGML_DOT_Q4_K](w, row_bytes, rows, x, ct, ldc);
    else
        kquant_tile(true, w, row_bytes, rows, x, ct, ldc);
}

static bool has_avxvnni(void) {
    return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

const em_ggml_kernel em_ggml_kernel_avxvnni = {
    .name = "avxvnni",
    .runs_here = has_avxvnni,
    .tile = {tile_q8_0, tile_q4_0, tile_q4_1, tile_q5_0, tile_q5_1, tile_q6_k,
             tile_q4_k, [EM_GGML_DOT_IQ4_NL] = tile_iq4_nl, [EM_GGML_DOT_MXFP4] = tile_mxfp4},
};
#endif
