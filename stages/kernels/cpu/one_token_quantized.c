/* The exact precision's one-token products straight from quantized rows (see
 * one_token_quantized.h), on AVX-512 with VBMI: 16 weight rows per vector, a row per lane.
 *
 * Per 32-value block of the 16 rows, the rows' quant bytes are loaded 4 rows to a vector (vector i
 * holds rows i, 4 + i, 8 + i, 12 + i, a row per 128-bit lane) and regrouped by two vpermi2b and a
 * blend into vectors of 4 byte positions x 16 rows; one vpermb then puts byte position j of the 16
 * rows into the low byte of 16 dwords (Q8_0: the high byte). Those become the values the row
 * functions of stages/formats give (Q4_1: low nibble j and high nibble j + 16 as floats by a
 * vpermps from the table 0 .. 15, then (float)q * d + m, two roundings; Q8_0: the signed byte by an
 * arithmetic shift, (float)q * d), and each value k meets x[k] in the chain
 * acc = fma(x[k], w[k], acc) in k order from 0: the conversion to floats and em_gemm_few_tokens's
 * chains without the floats written, transposed and read back. F16 rows are read 16 halves of 16
 * rows at a time, converted and transposed in registers (f16_rows). */
#include "stages/kernels/cpu/one_token_quantized.h"

#include <pthread.h>
#include <string.h>

#include "stages/formats/half.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "stages/kernels/cpu/transpose16_avx512.h"

#define VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi,f16c")))
#define ROWS 16

/* Bytes `at` .. at + 15 of each row, vector i holding rows i, 4 + i, 8 + i, 12 + i. */
VBMI static inline __m512i four_rows(const uint8_t *const blk[ROWS], int i, size_t at) {
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk[i] + at)));
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(blk[4 + i] + at)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(blk[8 + i] + at)), 2);
    return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(blk[12 + i] + at)), 3);
}

/* The byte permutations of byte_columns and column_dwords, made once. */
static uint8_t pair_index[64]; /* byte 16 jj + r: row r's byte jj within its pair of vectors */
static uint64_t upper_pair;    /* the bytes taken from the second pair (rows 4 L + 2, + 3) */
static uint8_t dword_index[2][4][64]; /* [top][jj]: byte 16 jj + r to byte 3 top of dword r */
static pthread_once_t indexes_once = PTHREAD_ONCE_INIT;

static void make_indexes(void) {
    for (int p = 0; p < 64; p++) {
        int jj = p / 16, r = p % 16, i = r % 4, L = r / 4;
        pair_index[p] = (uint8_t)(16 * L + jj + (i % 2 ? 64 : 0));
        if (i >= 2) upper_pair |= 1ull << p;
    }
    for (int jj = 0; jj < 4; jj++)
        for (int r = 0; r < 16; r++)
            for (int top = 0; top < 2; top++)
                dword_index[top][jj][4 * r + 3 * top] = (uint8_t)(16 * jj + r);
}

/* by[c] (c < 4): byte positions 4 c .. 4 c + 3 of the 16 rows' 16 bytes from `at`, byte
 * 16 jj + r of by[c] being row r's byte 4 c + jj. */
VBMI static inline void byte_columns(const uint8_t *const blk[ROWS], size_t at, __m512i by[4]) {
    __m512i z[4];
    for (int i = 0; i < 4; i++) z[i] = four_rows(blk, i, at);
    /* row r = 4 L + i's byte 4 c + jj is z_i's byte 16 L + 4 c + jj: from the pair (z0, z1)
     * for i < 2 and (z2, z3) for i >= 2 */
    const __m512i base = _mm512_loadu_si512(pair_index);
    for (int c = 0; c < 4; c++) {
        __m512i idx = _mm512_add_epi8(base, _mm512_set1_epi8((char)(4 * c)));
        __m512i a = _mm512_permutex2var_epi8(z[0], idx, z[1]);
        __m512i b = _mm512_permutex2var_epi8(z[2], idx, z[3]);
        by[c] = _mm512_mask_blend_epi8((__mmask64)upper_pair, a, b);
    }
}

/* Byte position j of the 16 rows (from byte_columns) in the low byte (top: the high byte) of 16
 * dwords, their other bytes zero. */
VBMI static inline __m512i column_dwords(const __m512i by[4], int j, bool top) {
    return _mm512_maskz_permutexvar_epi8(
        (__mmask64)(top ? 0x8888888888888888ull : 0x1111111111111111ull),
        _mm512_loadu_si512(dword_index[top][j % 4]), by[j / 4]);
}

/* The 16 rows' two fp16 at byte `at` (the start of a block: Q4_1's d and m; Q8_0's d and its
 * first two quants) as floats, lane r for row r: one dword a row. */
VBMI static inline void row_scales(const uint8_t *const blk[ROWS], size_t at, __m512 *first,
                                   __m512 *second) {
    uint32_t h[ROWS];
    for (int r = 0; r < ROWS; r++) memcpy(&h[r], blk[r] + at, 4);
    __m512i pairs = _mm512_loadu_si512(h);
    *first = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pairs));
    *second = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pairs, 16)));
}

/* The rows are taken 16 at a time, a row per lane, all of K for one group before the next: a
 * group's 16 rows are 16 short streams, and the lines of the next group's rows are fetched into L2
 * a share at a time while this group computes (each row is too short a stream for the hardware's
 * prefetchers to find in time). One sequence, tokens/s in alternating runs (AMD EPYC, 2 threads):
 * without the prefetches SmolLM2 F16 37, SmolLM2 Q4_1 55, the 110M model in Q8_0 63; with them
 * and 4 groups at a time (4 independent chains, 64 streams) 70, 93 and 113; one group at a time
 * (its chain waits on each fma, but 16 streams) 83, 102 and 117. */

/* The prefetches of the group after the one at w (its rows row_bytes apart): `lines` lines from
 * `next`, per_step of them before each of the group's `steps` steps. */
typedef struct next_group {
    const char *next;
    size_t lines, per_step, line;
} next_group;

static inline next_group next_group_of(const uint8_t *w, size_t row_bytes, int steps) {
    size_t lines = (size_t)ROWS * row_bytes / 64;
    return (next_group){(const char *)w + (size_t)ROWS * row_bytes, lines,
                        (lines + (size_t)steps - 1) / (size_t)steps, 0};
}

static inline void prefetch_step(next_group *p) {
    for (size_t l = 0; l < p->per_step && p->line < p->lines; l++, p->line++)
        _mm_prefetch(p->next + 64 * p->line, _MM_HINT_T1);
}

/* The 16 results of a group (rows <= 16 of them live) to c[j * ldc]. */
VBMI static inline void store_group(__m512 acc, int rows, float *c, size_t ldc) {
    float sums[ROWS];
    _mm512_storeu_ps(sums, acc);
    for (int r = 0; r < ROWS && r < rows; r++) c[(size_t)r * ldc] = sums[r];
}

/* c[j * ldc] for the rows w .. w + (rows - 1) row_bytes (rows <= 16) of Q4_1 (q4_1) or Q8_0. */
VBMI static inline __attribute__((always_inline)) void row_group(bool q4_1, int K, const float *x,
                                                                 size_t x_stride, const uint8_t *w,
                                                                 size_t row_bytes, int rows,
                                                                 float *c, size_t ldc) {
    const uint8_t *blk[ROWS];
    for (int r = 0; r < ROWS; r++) blk[r] = w + (size_t)(r < rows ? r : rows - 1) * row_bytes;
    const int block_bytes = q4_1 ? 20 : 34;
    next_group ahead = next_group_of(w, row_bytes, (K + 31) / 32);
    const __m512 small = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 acc = _mm512_setzero_ps();
    for (int k0 = 0; k0 < K; k0 += 32) {
        prefetch_step(&ahead);
        size_t block = (size_t)(k0 / 32) * block_bytes; /* the rows' block at this k0 */
        __m512 d, m;                                    /* m: Q4_1's minima (Q8_0: unused) */
        row_scales(blk, block, &d, &m);
        __m512i by[4];
        for (int half = 0; half < 2; half++) {
            /* Q4_1: the nibbles of bytes 0 .. 15 (values 0 .. 15 low, 16 .. 31 high); Q8_0: bytes
             * 16 half .. 16 half + 15 */
            if (!q4_1 || half == 0) byte_columns(blk, block + (q4_1 ? 4 : 2 + 16 * half), by);
            for (int j = 0; j < 16; j++) {
                __m512 xk = _mm512_set1_ps(x[(size_t)(k0 + 16 * half + j) * x_stride]);
                __m512i q = column_dwords(by, j, !q4_1);
                __m512 wk;
                if (q4_1) { /* the nibble's float from the table: VPERMPS reads the low 4 bits */
                    if (half) q = _mm512_srli_epi32(q, 4);
                    wk = _mm512_add_ps(_mm512_mul_ps(_mm512_permutexvar_ps(q, small), d), m);
                } else { /* the signed byte from the top of its dword */
                    wk = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srai_epi32(q, 24)), d);
                }
                acc = _mm512_fmadd_ps(xk, wk, acc);
            }
        }
    }
    store_group(acc, rows, c, ldc);
}

/* The rows in groups of 16. */
#define ROWS_KERNEL(name, is_q4_1)                                                                 \
    VBMI static void name(int K, const float *x, size_t x_stride, const uint8_t *w,                \
                          size_t row_bytes, int rows, float *c, size_t ldc) {                      \
        for (int r0 = 0; r0 < rows; r0 += ROWS)                                                    \
            row_group(is_q4_1, K, x, x_stride, w + (size_t)r0 * row_bytes, row_bytes,              \
                      rows - r0 < ROWS ? rows - r0 : ROWS, c + (size_t)r0 * ldc, ldc);             \
    }
ROWS_KERNEL(q4_1_rows, true)
ROWS_KERNEL(q8_0_rows, false)

/* F16 rows: c[j * ldc] for the rows of w in groups of 16. Per 16 values of a group's rows: the
 * halves as floats (exact, as em_f16_row), transposed in registers so that value k of the 16 rows
 * is one vector, and each k meets x[k] in the group's chain in k order: em_gemm_few_tokens's
 * chains on the converted rows, without the floats written and read back. */
VBMI static void f16_rows(int K, const float *x, size_t x_stride, const uint8_t *w,
                          size_t row_bytes, int rows, float *c, size_t ldc) {
    for (int r0 = 0; r0 < rows; r0 += ROWS) {
        int live = rows - r0 < ROWS ? rows - r0 : ROWS;
        const uint8_t *row[ROWS];
        for (int r = 0; r < ROWS; r++)
            row[r] = w + (size_t)(r0 + (r < live ? r : live - 1)) * row_bytes;
        next_group ahead = next_group_of(w + (size_t)r0 * row_bytes, row_bytes, (K + 15) / 16);
        __m512 acc = _mm512_setzero_ps();
        for (int k0 = 0; k0 < K; k0 += 16) {
            int kb = K - k0 < 16 ? K - k0 : 16;
            __mmask32 cols = (__mmask32)((1u << kb) - 1u); /* the halves of a row's 16 values */
            prefetch_step(&ahead);
            __m512 v[ROWS];
            for (int r = 0; r < ROWS; r++)
                v[r] = _mm512_cvtph_ps(_mm512_castsi512_si256(
                    _mm512_maskz_loadu_epi16(cols, (const void *)(row[r] + 2 * (size_t)k0))));
            em_transpose16_avx512(v);
            if (kb == 16) { /* v indexed by constants: it stays in registers */
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++)
                    acc =
                        _mm512_fmadd_ps(_mm512_set1_ps(x[(size_t)(k0 + j) * x_stride]), v[j], acc);
            } else { /* the last values: v through memory */
                float tail[16][16];
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++) _mm512_storeu_ps(tail[j], v[j]);
                for (int j = 0; j < kb; j++)
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(x[(size_t)(k0 + j) * x_stride]),
                                          _mm512_loadu_ps(tail[j]), acc);
            }
        }
        store_group(acc, live, c + (size_t)r0 * ldc, ldc);
    }
}

static bool has_avx512vbmi(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("f16c");
}

/* One row per weight type that has a kernel. */
static const struct {
    em_tensor_type type;
    em_one_token_quantized *rows;
} table[] = {
    {EM_TENSOR_Q4_1, q4_1_rows},
    {EM_TENSOR_Q8_0, q8_0_rows},
    {EM_TENSOR_F16, f16_rows},
};

em_one_token_quantized *em_one_token_quantized_for(em_tensor_type type) {
    if (!has_avx512vbmi()) return NULL;
    pthread_once(&indexes_once, make_indexes);
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (table[i].type == type) return table[i].rows;
    return NULL;
}
#else
em_one_token_quantized *em_one_token_quantized_for(em_tensor_type type) {
    (void)type;
    return NULL;
}
#endif
