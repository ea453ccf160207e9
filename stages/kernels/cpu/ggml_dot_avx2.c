/* The `ggml` precision's AVX2 kernel (see ggml_dot.h): tiles of 2 weight rows x 8 tokens (two
 * groups of 4, or one at the end). Per block, each row's quants are unpacked once to 32 bytes and
 * multiplied with each token's 32 activation bytes by maddubs and madd (exact 32-bit sums), a
 * group's 8 sums are gathered into one vector (lanes: row 0 tokens 0..3, row 1 tokens 0..3), and
 * the block's float steps run on those 8 lanes in the order of the C version, one IEEE rounding
 * each, so each lane gets the C result's bits. The tile's rows pass over chunks of 32 tokens,
 * whose activations stay in cache. A last odd row goes to the C kernel. One token alone (a
 * decoding step) takes 8 rows per pass instead, the lanes being the rows: the same steps, the same
 * bits, four times the useful lanes. IQ4_NL and MXFP4 are these tiles with signed quants looked
 * up from their nibbles (MXFP4's scale an E8M0 exponent); the K-quants, IQ4_XS and the types
 * decoded to integers (ggml_dot_iq.h) have their own tiles (below). */
#include "stages/kernels/cpu/ggml_dot.h"

#include "stages/formats/dequantize_rows.h"
#include "stages/kernels/cpu/ggml_dot_iq.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define EM_GGML_TOKEN_CHUNK 32 /* tokens per pass over a tile's rows (a multiple of 4) */

/* The 32 quants of a 4-bit block's 16 bytes: low nibbles (values 0..15), then high nibbles. */
AVX2 static inline __m256i nibbles(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

/* The signed bytes values[n] of the 32 nibbles n (0..15): IQ4_NL's or MXFP4's values. */
AVX2 static inline __m256i nibble_values(const int8_t values[16], __m256i n) {
    __m128i table = _mm_loadu_si128((const __m128i *)values);
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), n);
}

/* 0x10 in byte j where bit j of the 32 bits at qh is set (the fifth bit of Q5 quant j). */
AVX2 static inline __m256i fifth_bits(const uint8_t *qh) {
    uint32_t bits;
    memcpy(&bits, qh, 4);
    /* byte j takes byte j / 8 of the bits, then tests bit j % 8 */
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* 8 int32 partial sums of unsigned quants u (0..31) times signed activations y. */
AVX2 static inline __m256i dot_unsigned(__m256i u, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

/* The same for signed quants q (Q8_0): |q| times y with q's sign. */
AVX2 static inline __m256i dot_signed(__m256i q, __m256i y) {
    return dot_unsigned(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
}

/* [sum p0, ..., sum p7]: the 8 partial sums of each of p[0..7] added up. */
AVX2 static inline __m256i sums8(const __m256i p[8]) {
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    /* a: p0..p3 over their low 128 bits | p0..p3 over their high 128 bits; b the same for p4..p7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
}

AVX2 static inline float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* A 32-value block's scale: its fp16 d, or MXFP4's E8M0 exponent halved. */
AVX2 static inline float scale_at(em_ggml_dot_type type, const uint8_t *blk) {
    return em_ggml_block_layout_of(type).e8m0 ? em_e8m0_half(blk[0]) : half_at(blk);
}

/* One block's float step on 8 (row, token) lanes, in the C version's order (ggml_dot.h): fsum
 * the exact integer sums as floats, dw and mw the weight's scale and minimum, dx and sx the
 * activation's scale and sum (mw and sx read by Q4_1 and Q5_1 only). */
AVX2 static inline __m256 block_step(em_ggml_dot_type type, __m256 fsum, __m256 dw, __m256 dx,
                                     __m256 mw, __m256 sx) {
    __m256 step;
    if (type == EM_GGML_DOT_Q8_0) {
        step = _mm256_mul_ps(fsum, _mm256_mul_ps(dw, dx));
    } else if (type == EM_GGML_DOT_Q4_0) {
        step = _mm256_mul_ps(_mm256_mul_ps(fsum, dw), dx);
    } else {
        step = _mm256_mul_ps(_mm256_mul_ps(dw, dx), fsum);
    }
    if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1)
        step = _mm256_add_ps(step, _mm256_mul_ps(mw, sx));
    return step;
}

/* 2 rows x 4 G tokens (G = 1 or 2 groups of 4, each its own 8 lanes) at rows w0, w0 + row_bytes
 * and tokens t0 .. t0 + 4 G - 1 into ct: the groups share each block's unpacked quants and scales,
 * and their independent float chains overlap. */
AVX2 static inline __attribute__((always_inline)) void tile_2xG(em_ggml_dot_type type, int G,
                                                                const uint8_t *w0, size_t row_bytes,
                                                                const em_q8_activations *x, int t0,
                                                                float *ct, size_t ldc) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    /* the quants' offset (8 or 16) is a power of two: offset * sum(y) is a shift */
    const __m128i offset_shift =
        _mm_cvtsi32_si128(L.offset ? __builtin_ctz((unsigned)L.offset) : 0);
    const uint8_t *w[2] = {w0, w0 + row_bytes};
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < x->blocks; b++) {
        __m256i q[2];
        for (int r = 0; r < 2; r++) {
            const uint8_t *blk = w[r] + (size_t)b * L.bytes;
            if (type == EM_GGML_DOT_Q8_0) {
                q[r] = _mm256_loadu_si256((const __m256i *)(blk + 2));
            } else {
                q[r] = nibbles(blk + L.qs);
                if (L.qh) q[r] = _mm256_or_si256(q[r], fifth_bits(blk + L.qh));
                if (L.values) q[r] = nibble_values(L.values, q[r]);
            }
        }
        const uint8_t *blk0 = w[0] + (size_t)b * L.bytes, *blk1 = w[1] + (size_t)b * L.bytes;
        __m256 dw =
            _mm256_set_m128(_mm_set1_ps(scale_at(type, blk1)), _mm_set1_ps(scale_at(type, blk0)));
        __m256 mw = _mm256_setzero_ps();
        if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1)
            mw =
                _mm256_set_m128(_mm_set1_ps(half_at(blk1 + L.m)), _mm_set1_ps(half_at(blk0 + L.m)));
        for (int g = 0; g < G; g++) {
            size_t at = (size_t)b * x->tokens + t0 + 4 * g;
            __m256i p[8];
            for (int i = 0; i < 4; i++) {
                __m256i y = _mm256_loadu_si256((const __m256i *)(x->qs + (at + i) * EM_Q8_BLOCK));
                for (int r = 0; r < 2; r++) {
                    p[r * 4 + i] =
                        em_ggml_signed_quants(type) ? dot_signed(q[r], y) : dot_unsigned(q[r], y);
                }
            }
            __m256i sumi = sums8(p);
            if (type == EM_GGML_DOT_Q4_0 || type == EM_GGML_DOT_Q5_0) {
                /* quants stored with an offset of 8 (Q4_0) or 16 (Q5_0): less offset * sum(y) */
                __m128i ys = _mm_loadu_si128((const __m128i *)(x->sum + at));
                __m256i ysum = _mm256_set_m128i(ys, ys);
                sumi = _mm256_sub_epi32(sumi, _mm256_sll_epi32(ysum, offset_shift));
            }
            __m256 fsum = _mm256_cvtepi32_ps(sumi);
            __m128 d4 = _mm_loadu_ps(x->d + at);
            __m256 dx = _mm256_set_m128(d4, d4);
            __m256 sx = _mm256_setzero_ps();
            if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1) {
                __m128 s4 = _mm_loadu_ps(x->s + at);
                sx = _mm256_set_m128(s4, s4);
            }
            acc[g] = _mm256_add_ps(acc[g], block_step(type, fsum, dw, dx, mw, sx));
        }
    }
    for (int g = 0; g < G; g++) {
        _mm_storeu_ps(ct + t0 + 4 * g, _mm256_castps256_ps128(acc[g]));
        _mm_storeu_ps(ct + ldc + t0 + 4 * g, _mm256_extractf128_ps(acc[g], 1));
    }
}

/* 8 rows x 1 token (a decoding step's one row of activations): the 8 lanes are the rows w0 ..
 * w0 + 7 row_bytes at token t, each lane the (row, token) chain of tile_2xG and the C version,
 * with the same float steps in the same order, so the bits are theirs. */
AVX2 static inline __attribute__((always_inline)) void tile_8x1(em_ggml_dot_type type,
                                                                const uint8_t *w0, size_t row_bytes,
                                                                const em_q8_activations *x, int t,
                                                                float *ct, size_t ldc) {
    const em_ggml_block_layout L = em_ggml_block_layout_of(type);
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < x->blocks; b++) {
        size_t at = (size_t)b * x->tokens + t;
        __m256i y = _mm256_loadu_si256((const __m256i *)(x->qs + at * EM_Q8_BLOCK));
        __m256i p[8];
        uint16_t d16[8], m16[8];
        for (int r = 0; r < 8; r++) {
            const uint8_t *blk = w0 + (size_t)r * row_bytes + (size_t)b * L.bytes;
            memcpy(&d16[r], blk, 2);
            if (L.m) memcpy(&m16[r], blk + L.m, 2);
            if (type == EM_GGML_DOT_Q8_0) {
                p[r] = dot_signed(_mm256_loadu_si256((const __m256i *)(blk + 2)), y);
            } else if (L.values) {
                p[r] = dot_signed(nibble_values(L.values, nibbles(blk + L.qs)), y);
            } else {
                __m256i q = nibbles(blk + L.qs);
                if (L.qh) q = _mm256_or_si256(q, fifth_bits(blk + L.qh));
                p[r] = dot_unsigned(q, y);
            }
        }
        __m256i sumi = sums8(p);
        if (type == EM_GGML_DOT_Q4_0 || type == EM_GGML_DOT_Q5_0)
            sumi = _mm256_sub_epi32(sumi, _mm256_set1_epi32(x->sum[at] * L.offset));
        __m256 fsum = _mm256_cvtepi32_ps(sumi);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d16));
        if (L.e8m0) { /* MXFP4: d16[r]'s low byte is the exponent */
            float e[8];
            for (int r = 0; r < 8; r++) e[r] = em_e8m0_half((uint8_t)d16[r]);
            dw = _mm256_loadu_ps(e);
        }
        __m256 dx = _mm256_set1_ps(x->d[at]);
        __m256 mw = _mm256_setzero_ps(), sx = _mm256_setzero_ps();
        if (type == EM_GGML_DOT_Q4_1 || type == EM_GGML_DOT_Q5_1) {
            mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)m16));
            sx = _mm256_set1_ps(x->s[at]);
        }
        acc = _mm256_add_ps(acc, block_step(type, fsum, dw, dx, mw, sx));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (int r = 0; r < 8; r++) {
        ct[(size_t)r * ldc + t] = lanes[r];
        /* the padding tokens' activations are zeros (d = 0): their results, as the C kernel's */
        for (int pad = t + 1; pad < x->tokens; pad++) ct[(size_t)r * ldc + pad] = 0.0f;
    }
}

/* The row pair after the one at wj, into L2 while this pair computes: the first chunk of tokens
 * reads each pair from memory (a decoding step of 5 to 32 sequences meets each row once). A
 * prefetch past the matrix never faults. Xeon, EVALMESH_CPU_KERNEL=avx2, 110M Q8_0, 16 sequences,
 * the builds in turns: 334-342 -> 381-383 generated tokens/s (two pairs on: 365-385). */
static inline void ask_for_next_pair(const uint8_t *wj, size_t row_bytes) {
    const char *next = (const char *)(wj + 2 * row_bytes);
    for (size_t l = 0; l < (2 * row_bytes + 63) / 64; l++) _mm_prefetch(next + 64 * l, _MM_HINT_T2);
}

#define AVX2_TILE(name, column)                                                                    \
    AVX2 static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                     \
                                 const em_q8_activations *x, float *ct, size_t ldc) {              \
        const em_ggml_dot_type type = column;                                                      \
        int pairs = rows / 2 * 2, first = 0;                                                       \
        /* one token (a decoding step): 8 rows at a time, then pairs */                            \
        if (x->T == 1)                                                                             \
            for (; first + 8 <= rows; first += 8)                                                  \
                tile_8x1(type, w + (size_t)first * row_bytes, row_bytes, x, 0,                     \
                         ct + (size_t)first * ldc, ldc);                                           \
        /* chunks of tokens whose activations stay in cache while every row pair passes */         \
        for (int c0 = 0; c0 < x->tokens && first < pairs; c0 += EM_GGML_TOKEN_CHUNK) {             \
            int c1 = c0 + EM_GGML_TOKEN_CHUNK < x->tokens ? c0 + EM_GGML_TOKEN_CHUNK : x->tokens;  \
            for (int j = first; j < pairs; j += 2) {                                               \
                const uint8_t *wj = w + (size_t)j * row_bytes;                                     \
                if (c0 == 0) ask_for_next_pair(wj, row_bytes);                                     \
                int t0 = c0;                                                                       \
                for (; t0 + 8 <= c1; t0 += 8)                                                      \
                    tile_2xG(type, 2, wj, row_bytes, x, t0, ct + (size_t)j * ldc, ldc);            \
                if (t0 < c1) tile_2xG(type, 1, wj, row_bytes, x, t0, ct + (size_t)j * ldc, ldc);   \
            }                                                                                      \
        }                                                                                          \
        int j = pairs;                                                                             \
        if (j < rows) {                                                                            \
            em_ggml_kernel_c.tile[type](w + (size_t)j * row_bytes, row_bytes, rows - j, x,         \
                                        ct + (size_t)j * ldc, ldc);                                \
        }                                                                                          \
    }
AVX2_TILE(q8_0, EM_GGML_DOT_Q8_0)
AVX2_TILE(q4_0, EM_GGML_DOT_Q4_0)
AVX2_TILE(q4_1, EM_GGML_DOT_Q4_1)
AVX2_TILE(q5_0, EM_GGML_DOT_Q5_0)
AVX2_TILE(q5_1, EM_GGML_DOT_Q5_1)
AVX2_TILE(iq4_nl, EM_GGML_DOT_IQ4_NL)
AVX2_TILE(mxfp4, EM_GGML_DOT_MXFP4)

/* The K-quants Q6_K, Q3_K, Q4_K, Q5_K and Q2_K (see ggml_dot.h and ggml_dot.c). Each row's block is
 * unpacked once per chunk of tokens: its 256 quants in 8 vectors of 32 bytes (Q6_K: two 16-value
 * sub-blocks of 6-bit value - 32; Q4_K and Q5_K: one 32-value sub-block of 4- or 5-bit values), the
 * bytes of each 16 values interleaved (values l and l + 8 side by side, as the activations are
 * shuffled too), so that maddubs adds exactly two products of integer lane l; madd against {scale,
 * 0} and {0, scale} then takes the even and the odd lanes. The lanes' float steps are those of C,
 * per (row, token) in block order. */
#define KQUANT_CHUNK 32 /* tokens sharing one unpacking of a row's block */

typedef struct kquant_block {
    __m256i abs_q[8], q[8];  /* |quant| and quant (Q6_K, for the signs); Q4_K: abs_q only */
    __m256i even[8], odd[8]; /* {scale, 0} and {0, scale} per 32-bit lane, per vector's halves */
    float d, dmin;           /* the block's fp16 scale (and Q4_K's fp16 scale of the minima) */
    int min[16];             /* Q4_K: the sub-blocks' 6-bit minima (8); Q2_K: 4-bit ones (16) */
} kquant_block;

static const int8_t interleave_bytes[32] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
                                            0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};

/* The 16 sub-blocks' scales (of 16 values) as k->even and k->odd: vector v's halves hold
 * sub-blocks 2v and 2v + 1, each scale a 16-bit lane, low (even) or high (odd) in its 32 bits. */
AVX2 static void sub_block_scales(const int8_t scale[16], kquant_block *k) {
    for (int v = 0; v < 8; v++) {
        uint32_t s0 = (uint32_t)scale[2 * v] & 0xffff, s1 = (uint32_t)scale[2 * v + 1] & 0xffff;
        k->even[v] = _mm256_set_m128i(_mm_set1_epi32((int)s1), _mm_set1_epi32((int)s0));
        k->odd[v] =
            _mm256_set_m128i(_mm_set1_epi32((int)(s1 << 16)), _mm_set1_epi32((int)(s0 << 16)));
    }
}

AVX2 static void unpack_q6k(const uint8_t *w, kquant_block *k) {
    const __m256i low = _mm256_set1_epi8(15), two = _mm256_set1_epi8(0x30);
    const __m256i interleave = _mm256_loadu_si256((const __m256i *)interleave_bytes);
    for (int h = 0; h < 2; h++) {
        __m256i ql0 = _mm256_loadu_si256((const __m256i *)(w + 64 * h));
        __m256i ql1 = _mm256_loadu_si256((const __m256i *)(w + 64 * h + 32));
        __m256i qh = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h));
        __m256i hi[4] = {_mm256_and_si256(_mm256_slli_epi16(qh, 4), two),
                         _mm256_and_si256(_mm256_slli_epi16(qh, 2), two), _mm256_and_si256(qh, two),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), two)};
        __m256i lo[4] = {_mm256_and_si256(ql0, low), _mm256_and_si256(ql1, low),
                         _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low),
                         _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low)};
        for (int i = 0; i < 4; i++) {
            __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo[i], hi[i]), _mm256_set1_epi8(32));
            q = _mm256_shuffle_epi8(q, interleave);
            k->q[4 * h + i] = q;
            k->abs_q[4 * h + i] = _mm256_abs_epi8(q);
        }
    }
    int8_t scale[16];
    memcpy(scale, w + 192, 16);
    sub_block_scales(scale, k);
    k->d = half_at(w + 208);
}

/* Q3_K: as Q6_K's, the quants 2 bits of qs (at 32) less 4 where the hmask bit (at 0) is clear,
 * the scales em_k3_scales's, d at 108. */
AVX2 static void unpack_q3k(const uint8_t *w, kquant_block *k) {
    const __m256i interleave = _mm256_loadu_si256((const __m256i *)interleave_bytes);
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)w);
    for (int h = 0; h < 2; h++) {
        __m256i qs = _mm256_loadu_si256((const __m256i *)(w + 32 + 32 * h));
        for (int i = 0; i < 4; i++) { /* values 128 h + 32 i + l: sub-blocks 8 h + 2 i, + 1 */
            __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * i), three);
            __m256i high = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + i), one);
            __m256i q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(high, 2)),
                                        _mm256_set1_epi8(4));
            q = _mm256_shuffle_epi8(q, interleave);
            k->q[4 * h + i] = q;
            k->abs_q[4 * h + i] = _mm256_abs_epi8(q);
        }
    }
    int8_t scale[16];
    em_k3_scales(w + 96, scale);
    sub_block_scales(scale, k);
    k->d = half_at(w + 108);
}

/* Q2_K: unsigned 2-bit quants of qs (at 16) laid out as Q3_K's, 4-bit scales and minima
 * (scales at 0), d at 80 and dmin at 82. */
AVX2 static void unpack_q2k(const uint8_t *w, kquant_block *k) {
    const __m256i interleave = _mm256_loadu_si256((const __m256i *)interleave_bytes);
    const __m256i three = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i qs = _mm256_loadu_si256((const __m256i *)(w + 16 + 32 * h));
        for (int i = 0; i < 4; i++) /* values 128 h + 32 i + l: sub-blocks 8 h + 2 i, + 1 */
            k->abs_q[4 * h + i] = _mm256_shuffle_epi8(
                _mm256_and_si256(_mm256_srli_epi16(qs, 2 * i), three), interleave);
    }
    int8_t scale[16];
    for (int j = 0; j < 16; j++) {
        scale[j] = (int8_t)(w[j] & 15);
        k->min[j] = w[j] >> 4;
    }
    sub_block_scales(scale, k);
    k->d = half_at(w + 80);
    k->dmin = half_at(w + 82);
}

/* Q4_K, or Q5_K (five_bits: its quants at 48, plus 16 where bit j of qh[l] at 16 is set). */
AVX2 static void unpack_q4k(const uint8_t *w, bool five_bits, kquant_block *k) {
    const __m256i interleave = _mm256_loadu_si256((const __m256i *)interleave_bytes);
    const __m256i low = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    const __m256i qh = five_bits ? _mm256_loadu_si256((const __m256i *)(w + 16)) : one;
    for (int i = 0; i < 4; i++) {
        __m256i qs = _mm256_loadu_si256((const __m256i *)(w + (five_bits ? 48 : 16) + 32 * i));
        __m256i lo = _mm256_and_si256(qs, low),
                hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), low);
        if (five_bits) { /* bits 2i and 2i + 1 of each qh byte, as 16 */
            lo = _mm256_or_si256(
                lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i), one), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * i + 1), one), 4));
        }
        k->abs_q[2 * i] = _mm256_shuffle_epi8(lo, interleave);
        k->abs_q[2 * i + 1] = _mm256_shuffle_epi8(hi, interleave);
    }
    for (int j = 0; j < 8; j++) {
        uint8_t scale, min;
        em_k4_scale_min(j, w + 4, &scale, &min);
        k->even[j] = _mm256_set1_epi32(scale);
        k->odd[j] = _mm256_set1_epi32(scale << 16);
        k->min[j] = min;
    }
    k->d = half_at(w);
    k->dmin = half_at(w + 2);
}

/* The 8 integer lanes of one unpacked block and one token's Q8_K block y (signed: Q6_K's quants,
 * multiplied through their signs; else Q4_K's unsigned ones). */
AVX2 static inline __m256i kquant_lanes(const kquant_block *k, const int8_t *y, bool is_signed) {
    const __m256i interleave = _mm256_loadu_si256((const __m256i *)interleave_bytes);
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
    for (int v = 0; v < 8; v++) {
        __m256i yv =
            _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(y + 32 * v)), interleave);
        __m256i pairs =
            _mm256_maddubs_epi16(k->abs_q[v], is_signed ? _mm256_sign_epi8(yv, k->q[v]) : yv);
        even = _mm256_add_epi32(even, _mm256_madd_epi16(pairs, k->even[v]));
        odd = _mm256_add_epi32(odd, _mm256_madd_epi16(pairs, k->odd[v]));
    }
    /* even: lanes 0, 2, 4, 6 of the vectors' low halves | of their high halves; odd likewise */
    __m128i e = _mm_add_epi32(_mm256_castsi256_si128(even), _mm256_extracti128_si256(even, 1));
    __m128i o = _mm_add_epi32(_mm256_castsi256_si128(odd), _mm256_extracti128_si256(odd, 1));
    return _mm256_set_m128i(_mm_unpackhi_epi32(e, o), _mm_unpacklo_epi32(e, o));
}

/* A tile of Q6_K, Q3_K, Q4_K, Q5_K or Q2_K rows (type), in ggml_dot.h's order per (row, token). */
AVX2 static inline __attribute__((always_inline)) void
kquant_tile(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int rows,
            const em_q8_activations *x, float *ct, size_t ldc) {
    kquant_block k;
    const bool is_q4k = type == EM_GGML_DOT_Q4_K || type == EM_GGML_DOT_Q5_K,
               five_bits = type == EM_GGML_DOT_Q5_K;
    const bool is_q2k = type == EM_GGML_DOT_Q2_K; /* unsigned, no lanes: one sum a block */
    const int block_bytes = type == EM_GGML_DOT_Q6_K   ? 210
                            : type == EM_GGML_DOT_Q3_K ? 110
                            : is_q2k                   ? 84
                            : five_bits                ? 176
                                                       : 144;
    for (int c0 = 0; c0 < x->tokens; c0 += KQUANT_CHUNK) {
        int n = x->tokens - c0 < KQUANT_CHUNK ? x->tokens - c0 : KQUANT_CHUNK;
        for (int j = 0; j < rows; j++) {
            __m256 sums[KQUANT_CHUNK];
            float sumf[KQUANT_CHUNK];
            for (int t = 0; t < n; t++) {
                sums[t] = _mm256_setzero_ps();
                sumf[t] = 0.0f;
            }
            for (int b = 0; b < x->kblocks; b++) {
                const uint8_t *blk = w + (size_t)j * row_bytes + (size_t)b * block_bytes;
                if (is_q4k)
                    unpack_q4k(blk, five_bits, &k);
                else if (type == EM_GGML_DOT_Q3_K)
                    unpack_q3k(blk, &k);
                else if (is_q2k)
                    unpack_q2k(blk, &k);
                else
                    unpack_q6k(blk, &k);
                for (int t = 0; t < n; t++) {
                    size_t at = (size_t)b * x->tokens + c0 + t;
                    __m256i lanes =
                        kquant_lanes(&k, x->kqs + at * EM_Q8K_BLOCK, !is_q4k && !is_q2k);
                    if (is_q2k) {
                        const int16_t *bsums = x->kbsums + at * 16;
                        int summs = 0, isum = 0, lane[8];
                        for (int i = 0; i < 16; i++) summs += bsums[i] * k.min[i];
                        _mm256_storeu_si256((__m256i *)lane, lanes);
                        for (int l = 0; l < 8; l++) isum += lane[l];
                        float dall = x->kd[at] * k.d, dmin = x->kd[at] * k.dmin;
                        sumf[t] += dall * (float)isum - dmin * (float)summs;
                        continue;
                    }
                    __m256 d = _mm256_set1_ps(k.d * x->kd[at]);
                    sums[t] = _mm256_add_ps(sums[t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(lanes)));
                    if (is_q4k) {
                        const int16_t *bsums = x->kbsums + at * 16;
                        int sumi = 0;
                        for (int i = 0; i < 16; i++) sumi += bsums[i] * k.min[i / 2];
                        sumf[t] -= (k.dmin * x->kd[at]) * (float)sumi;
                    }
                }
            }
            for (int t = 0; t < n; t++) {
                float lane_sums[8];
                _mm256_storeu_ps(lane_sums, sums[t]);
                for (int l = 0; l < 8; l++) sumf[t] += lane_sums[l];
                ct[(size_t)j * ldc + c0 + t] = sumf[t];
            }
        }
    }
}

#define KQUANT_TILE(name, column)                                                                  \
    AVX2 static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                     \
                                 const em_q8_activations *x, float *ct, size_t ldc) {              \
        kquant_tile(column, w, row_bytes, rows, x, ct, ldc);                                       \
    }
EM_GGML_KQUANTS(KQUANT_TILE)

/* IQ4_XS (ggml_dot.c's dot_iq4_xs): per row and block, the 8 sub-blocks' signed values unpacked
 * once per chunk of tokens (a vector each); per token, maddubs and madd give each sub-block's
 * partial sums, sums8 the 8 exact sub-block sums, and the float steps run in C's order. */
AVX2 static void tile_iq4_xs(const uint8_t *w, size_t row_bytes, int rows,
                             const em_q8_activations *x, float *ct, size_t ldc) {
    for (int c0 = 0; c0 < x->tokens; c0 += KQUANT_CHUNK) {
        int n = x->tokens - c0 < KQUANT_CHUNK ? x->tokens - c0 : KQUANT_CHUNK;
        for (int j = 0; j < rows; j++) {
            float sumf[KQUANT_CHUNK] = {0};
            for (int b = 0; b < x->kblocks; b++) {
                const uint8_t *blk = w + (size_t)j * row_bytes + (size_t)b * 136;
                __m256i q[8], abs_q[8];
                float scale[8];
                for (int v = 0; v < 8; v++) {
                    q[v] = nibble_values(em_iq4nl_values, nibbles(blk + 8 + 16 * v));
                    abs_q[v] = _mm256_abs_epi8(q[v]);
                    scale[v] = (float)em_iq4_xs_scale(blk, v);
                }
                float dw = half_at(blk);
                for (int t = 0; t < n; t++) {
                    size_t at = (size_t)b * x->tokens + c0 + t;
                    const int8_t *y = x->kqs + at * EM_Q8K_BLOCK;
                    __m256i p[8];
                    for (int v = 0; v < 8; v++) {
                        __m256i yv = _mm256_loadu_si256((const __m256i *)(y + 32 * v));
                        p[v] = dot_unsigned(abs_q[v], _mm256_sign_epi8(yv, q[v]));
                    }
                    int sumi[8];
                    _mm256_storeu_si256((__m256i *)sumi, sums8(p));
                    float d4d8 = dw * x->kd[at];
                    for (int v = 0; v < 8; v++) sumf[t] += (d4d8 * scale[v]) * (float)sumi[v];
                }
            }
            for (int t = 0; t < n; t++) ct[(size_t)j * ldc + c0 + t] = sumf[t];
        }
    }
}

/* The exact sum of 256 words w (16 vectors) times the activations y (256 bytes). */
AVX2 static inline int32_t word_sum(const __m256i w[16], const int8_t *y) {
    __m256i acc = _mm256_setzero_si256();
    for (int v = 0; v < 16; v++) {
        __m256i yv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(y + 16 * v)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(w[v], yv));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

/* The types decoded to integers (ggml_dot_iq.h: the lattice IQ types, TQ1_0, TQ2_0): per row and
 * block the values decoded once per chunk of tokens into words, per token their exact sums by madd,
 * and C's float steps and factor. */
AVX2 static inline __attribute__((always_inline)) void
decoded_tile(em_ggml_dot_type type, const uint8_t *w, size_t row_bytes, int rows,
             const em_q8_activations *x, float *ct, size_t ldc) {
    const int block_bytes = em_iq_block_bytes(type);
    for (int c0 = 0; c0 < x->tokens; c0 += KQUANT_CHUNK) {
        int n = x->tokens - c0 < KQUANT_CHUNK ? x->tokens - c0 : KQUANT_CHUNK;
        for (int j = 0; j < rows; j++) {
            float sumf[KQUANT_CHUNK] = {0};
            for (int b = 0; b < x->kblocks; b++) {
                const uint8_t *blk = w + (size_t)j * row_bytes + (size_t)b * block_bytes;
                em_iq_decoded v;
                em_iq_decode(type, blk, &v);
                __m256i words[16], delta[16];
                for (int i = 0; i < 16; i++) {
                    words[i] = _mm256_loadu_si256((const __m256i *)(v.w + 16 * i));
                    if (em_iq_has_delta(type))
                        delta[i] = _mm256_loadu_si256((const __m256i *)(v.delta + 16 * i));
                }
                float d = em_iq_block_scale(type, blk);
                for (int t = 0; t < n; t++) {
                    size_t at = (size_t)b * x->tokens + c0 + t;
                    const int8_t *y = x->kqs + at * EM_Q8K_BLOCK;
                    int32_t delta_sum = em_iq_has_delta(type) ? word_sum(delta, y) : 0;
                    sumf[t] =
                        em_iq_step(type, sumf[t], d, x->kd[at], word_sum(words, y), delta_sum);
                }
            }
            for (int t = 0; t < n; t++) ct[(size_t)j * ldc + c0 + t] = em_iq_factor(type) * sumf[t];
        }
    }
}

#define DECODED_TILE(name, column)                                                                 \
    AVX2 static void tile_##name(const uint8_t *w, size_t row_bytes, int rows,                     \
                                 const em_q8_activations *x, float *ct, size_t ldc) {              \
        decoded_tile(column, w, row_bytes, rows, x, ct, ldc);                                      \
    }
EM_GGML_DECODED_TYPES(DECODED_TILE)

static bool has_avx2(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}

const em_ggml_kernel em_ggml_kernel_avx2 = {
    .name = "avx2",
    .runs_here = has_avx2,
    .tile = {tile_q8_0, tile_q4_0, tile_q4_1, tile_q5_0, tile_q5_1, tile_q6_k, tile_q4_k, tile_q5_k,
             tile_q3_k, tile_q2_k, em_ggml_f16_tile_avx2, tile_iq4_nl, tile_iq4_xs,
             EM_GGML_DECODED_TYPES(EM_GGML_TILE_ENTRY)[EM_GGML_DOT_MXFP4] = tile_mxfp4},
};
#endif
