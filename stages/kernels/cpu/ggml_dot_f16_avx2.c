/* The `ggml` precision's F16 dot products (ggml_dot.h: fp16 weight rows times activations rounded
 * to fp16, 16 lanes over the values and a fixed tree) on AVX2 with F16C, the F16 column of the
 * avx2 row (and of avxvnni, which has none of its own).
 *
 * A (row, token) pair's 16 lanes are two 8-float vectors, lo (lanes 0..7) and hi (8..15): chunk
 * c of the row (halves widened by vcvtph2ps) times the same chunk of the token, added into them;
 * a product of two fp16 values is exact in float, so the fma is the C version's multiply and
 * add. 4 pairs run at once, 4 rows of one token (a decoding step) or 2 rows x 2 tokens, 8
 * independent chains. The tree then adds hi into lo (lane l + 8 into l), the upper 128 bits into
 * the lower (l + 4), then l + 2 and l + 1. A last group of fewer rows repeats its last row and
 * stores only the live ones; the last chunk of a row whose length is not a multiple of 16 reads
 * zeros past its end, as the C version pads it. */
#include "stages/kernels/cpu/ggml_dot.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define PAIRS 4          /* (row, token) pairs a group accumulates */
#define SPREAD_TOKENS 16 /* the tokens whose passes ask for the next rows */

/* The tree sum of one pair's lanes lo (0..7) and hi (8..15). */
AVX2 static inline float tree_sum(__m256 lo, __m256 hi) {
    __m256 u = _mm256_add_ps(lo, hi);                                              /* l += l + 8 */
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)); /* l + 4 */
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));                                        /* l + 2 */
    v = _mm_add_ss(v, _mm_shuffle_ps(v, v, 1));                                    /* l + 1 */
    return _mm_cvtss_f32(v);
}

/* Values at .. at + 15 of a row of K halves as two 8-float vectors, zeros past K. */
AVX2 static inline __attribute__((always_inline)) void row_chunk(const uint8_t *row, int at, int K,
                                                                 __m256 *lo, __m256 *hi) {
    const uint16_t *p = (const uint16_t *)row + at;
    __m256i halves;
    if (at + 16 <= K) {
        halves = _mm256_loadu_si256((const __m256i *)p);
    } else {
        uint16_t tail[16] = {0};
        memcpy(tail, p, (size_t)(K - at) * sizeof *tail);
        halves = _mm256_loadu_si256((const __m256i *)tail);
    }
    *lo = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
    *hi = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
}

/* Rows w .. w + rows - 1 times tokens 0 .. tokens - 1: groups of rows_per x tokens_per pairs
 * (4 x 1 or 2 x 2). */
AVX2 static inline __attribute__((always_inline)) void
pair_groups(const uint8_t *w, size_t row_bytes, int rows, const em_q8_activations *x, int tokens,
            float *ct, size_t ldc, int rows_per, int tokens_per) {
    const int K = (int)(row_bytes / 2);
    /* the passes over the first `spread` tokens ask for the next rows (see below) */
    const int spread = tokens < SPREAD_TOKENS ? tokens : SPREAD_TOKENS;
    const size_t hs = (size_t)x->hstride, lines = ((size_t)rows_per * row_bytes + 63) / 64,
                 steps = (size_t)(x->hstride / 16) * (size_t)(spread / tokens_per);
    for (int r0 = 0; r0 < rows; r0 += rows_per) {
        const uint8_t *row[PAIRS];
        for (int r = 0; r < rows_per; r++)
            row[r] = w + (size_t)(r0 + r < rows ? r0 + r : rows - 1) * row_bytes;
        const char *next = (const char *)(w + (size_t)(r0 + rows_per) * row_bytes);
        size_t line = 0, owed = 0;
        for (int t0 = 0; t0 < tokens; t0 += tokens_per) {
            __m256 lo[PAIRS], hi[PAIRS]; /* pair r * tokens_per + t: row r0 + r, token t0 + t */
            for (int i = 0; i < PAIRS; i++) lo[i] = hi[i] = _mm256_setzero_ps();
            for (int at = 0; at < x->hstride; at += 16) {
                /* the next group's rows, fetched while these compute (a prefetch past the end
                 * never faults). With several tokens, into L2 and spread evenly over the
                 * chunks of the passes over the first `spread` tokens (a Bresenham count; over
                 * every pass of a long window the counting costs): asked for in the first pass
                 * alone (into L1), they came late and that pass waited on memory. Xeon, 2 threads,
                 * EVALMESH_CPU_KERNEL=avx2, SmolLM2-135M F16, 16 sequences, the builds in turns:
                 * 190-195 -> 211-212 generated tokens/s. One token's single pass asks for each
                 * row's line beside the one it reads, into L1 (spread evenly, one sequence
                 * decoded at 58-59 tokens/s against 62-66). */
                if (tokens_per > 1 && t0 < spread)
                    for (owed += lines; owed >= steps; owed -= steps, line++)
                        _mm_prefetch(next + 64 * line, _MM_HINT_T2);
                for (int r = 0; r < rows_per; r++) {
                    if (tokens_per == 1 && at % 32 == 0)
                        _mm_prefetch((const char *)(row[r] + (size_t)rows_per * row_bytes) + 2 * at,
                                     _MM_HINT_T0);
                    __m256 wlo, whi;
                    row_chunk(row[r], at, K, &wlo, &whi);
                    for (int t = 0; t < tokens_per; t++) {
                        const float *h = x->h + (size_t)(t0 + t) * hs + at;
                        int i = r * tokens_per + t;
                        lo[i] = _mm256_fmadd_ps(wlo, _mm256_loadu_ps(h), lo[i]);
                        hi[i] = _mm256_fmadd_ps(whi, _mm256_loadu_ps(h + 8), hi[i]);
                    }
                }
            }
            for (int r = 0; r < rows_per && r0 + r < rows; r++)
                for (int t = 0; t < tokens_per; t++)
                    ct[(size_t)(r0 + r) * ldc + t0 + t] =
                        tree_sum(lo[r * tokens_per + t], hi[r * tokens_per + t]);
        }
    }
}

AVX2 void em_ggml_f16_tile_avx2(const uint8_t *w, size_t row_bytes, int rows,
                                const em_q8_activations *x, float *ct, size_t ldc) {
    if (x->T == 1) { /* the padding tokens' products are zeros */
        pair_groups(w, row_bytes, rows, x, 1, ct, ldc, 4, 1);
        for (int j = 0; j < rows; j++)
            for (int t = 1; t < x->tokens; t++) ct[(size_t)j * ldc + t] = 0.0f;
    } else { /* x->tokens is a multiple of 4 */
        pair_groups(w, row_bytes, rows, x, x->tokens, ct, ldc, 2, 2);
    }
}
#endif
