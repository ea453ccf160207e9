/* The `ggml` precision's F16 dot products (ggml_dot.h: fp16 weight rows times activations rounded
 * to fp16, 16 lanes over the values and a fixed tree) on AVX-512, the F16 column of the
 * avx512vnni row (it needs only AVX-512 F and BW with F16C).
 *
 * A vector is one (row, token) pair's 16 lanes: chunk c of the row (values 16 c .. 16 c + 15,
 * halves widened by vcvtph2ps) times the same chunk of the token, added into the pair's
 * accumulator. A product of two fp16 values is exact in float, so the fma is the C version's
 * multiply and add. 16 pairs run at once: 16 rows of one token (a decoding step: 16 row streams
 * read once, the next group prefetched into L2), or 4 rows x 4 tokens (the rows stay in L1 across
 * the token groups, the next 4 rows prefetched into L2 during all of them). Their 16 accumulators
 * are then reduced together, each by the tree. A last group of fewer rows repeats its last row and
 * stores only the live ones; the last chunk of a row whose length is not a multiple of 16 loads
 * zeros past its end, as the C version pads it. */
#include "stages/kernels/cpu/ggml_dot.h"

#include "stages/kernels/cpu/ggml_dot_lanes.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))
#define PAIRS 16          /* (row, token) pairs a group accumulates */
#define SPREAD_TOKENS 16  /* the tokens whose passes ask for the next rows */
#define PREFETCH_GROUPS 2 /* how far ahead a decoding step fetches rows, in groups */

/* Lane i of the result = the tree sum (ggml_dot.h) of acc[i]'s 16 lanes: pairs of vectors are
 * folded half on half, so that every step adds lane l + h to lane l of each pair as the tree
 * does, and the outputs end in a 4 x 4 order that one permute undoes. */
AVX512 static inline __m512 tree_sums(const __m512 acc[PAIRS]) {
    __m512 d[8], e[4], f[2];
    for (int i = 0; i < 8; i++) /* l += l + 8: outputs 2i, 2i + 1 in the 256-bit halves */
        d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0xee));
    for (int i = 0; i < 4; i++) /* l += l + 4: outputs 4i .. 4i + 3 in the 128-bit lanes */
        e[i] = _mm512_add_ps(_mm512_shuffle_f32x4(d[2 * i], d[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(d[2 * i], d[2 * i + 1], 0xdd));
    for (int i = 0; i < 2; i++) /* l += l + 2: 128-bit lane m holds outputs 8i + m, 8i + 4 + m */
        f[i] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * i], e[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(e[2 * i], e[2 * i + 1], 0xee));
    /* l += l + 1: lane 4 m + j holds output m + 4 j */
    __m512 r =
        _mm512_add_ps(_mm512_shuffle_ps(f[0], f[1], 0x88), _mm512_shuffle_ps(f[0], f[1], 0xdd));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, r);
}

/* Chunk `at` (a value index) of a row of halves as floats: all 16 values, or those of `tail`. */
AVX512 static inline __attribute__((always_inline)) __m512 row_chunk(const uint8_t *row, int at,
                                                                     __mmask16 tail) {
    const uint16_t *p = (const uint16_t *)row + at;
    return _mm512_cvtph_ps(tail == 0xffff ? _mm256_loadu_si256((const __m256i *)p)
                                          : _mm256_maskz_loadu_epi16(tail, p));
}

/* Rows w .. w + rows - 1 times token 0 of x: a decoding step. */
AVX512 static void one_token(const uint8_t *w, size_t row_bytes, int rows,
                             const em_q8_activations *x, float *ct, size_t ldc) {
    const int K = (int)(row_bytes / 2), full = K / 16;
    const __mmask16 tail = (__mmask16)((1u << (K % 16)) - 1);
    const float *h = x->h; /* token 0 */
    const size_t lines = (PAIRS * row_bytes + 63) / 64,
                 per_chunk = full ? (lines + full - 1) / full : 0;
    for (int r0 = 0; r0 < rows; r0 += PAIRS) {
        const uint8_t *row[PAIRS];
        for (int i = 0; i < PAIRS; i++)
            row[i] = w + (size_t)(r0 + i < rows ? r0 + i : rows - 1) * row_bytes;
        /* the rows PREFETCH_GROUPS groups on, into L2 while these compute (each row is too short
         * a stream for the hardware's prefetcher), past the tile's end too: the next tile in
         * memory is mostly the same thread's (em_schedule_tiles), and a prefetch never faults */
        const char *next = (const char *)(w + (size_t)(r0 + PREFETCH_GROUPS * PAIRS) * row_bytes);
        __m512 acc[PAIRS];
        for (int i = 0; i < PAIRS; i++) acc[i] = _mm512_setzero_ps();
        for (int c = 0; c < full; c++) {
            for (size_t l = (size_t)c * per_chunk; l < (size_t)(c + 1) * per_chunk && l < lines;
                 l++)
                _mm_prefetch(next + 64 * l, _MM_HINT_T1);
            __m512 hx = _mm512_loadu_ps(h + 16 * c);
            for (int i = 0; i < PAIRS; i++)
                acc[i] = _mm512_fmadd_ps(row_chunk(row[i], 16 * c, 0xffff), hx, acc[i]);
        }
        if (tail) {
            __m512 hx = _mm512_loadu_ps(h + 16 * full);
            for (int i = 0; i < PAIRS; i++)
                acc[i] = _mm512_fmadd_ps(row_chunk(row[i], 16 * full, tail), hx, acc[i]);
        }
        float sums[PAIRS];
        _mm512_storeu_ps(sums, tree_sums(acc));
        for (int i = 0; i < PAIRS && r0 + i < rows; i++) {
            ct[(size_t)(r0 + i) * ldc] = sums[i];
            for (int t = 1; t < x->tokens; t++) ct[(size_t)(r0 + i) * ldc + t] = 0.0f; /* padding */
        }
    }
}

/* acc[4 r + t] += chunk c of row r times chunk c of token t (h: 4 tokens hstride apart), the
 * chunk's values those of mask. */
AVX512 static inline __attribute__((always_inline)) void
four_by_four_chunk(__m512 acc[PAIRS], const uint8_t *const row[4], const float *h, size_t hstride,
                   int c, __mmask16 mask) {
    __m512 hx[4];
    for (int t = 0; t < 4; t++) hx[t] = _mm512_loadu_ps(h + (size_t)t * hstride + 16 * c);
    for (int r = 0; r < 4; r++) {
        __m512 wv = row_chunk(row[r], 16 * c, mask);
        for (int t = 0; t < 4; t++) acc[4 * r + t] = _mm512_fmadd_ps(wv, hx[t], acc[4 * r + t]);
    }
}

/* Rows w .. w + rows - 1 times tokens 0 .. x->tokens - 1 (a multiple of 4), 4 x 4 at a time. */
AVX512 static void four_by_four(const uint8_t *w, size_t row_bytes, int rows,
                                const em_q8_activations *x, float *ct, size_t ldc) {
    const int K = (int)(row_bytes / 2), full = K / 16;
    const __mmask16 tail = (__mmask16)((1u << (K % 16)) - 1);
    /* the passes over the first `spread` tokens ask for the next rows (see below) */
    const int spread = x->tokens < SPREAD_TOKENS ? x->tokens : SPREAD_TOKENS;
    const size_t hs = (size_t)x->hstride, lines = (4 * row_bytes + 63) / 64,
                 steps = (size_t)full * (size_t)(spread / 4); /* chunks of those passes */
    for (int r0 = 0; r0 < rows; r0 += 4) {
        const uint8_t *row[4];
        for (int r = 0; r < 4; r++)
            row[r] = w + (size_t)(r0 + r < rows ? r0 + r : rows - 1) * row_bytes;
        /* the next 4 rows, fetched into L2 while the passes over the first `spread` tokens
         * compute: `lines` of them spread evenly over those passes' `steps` chunks (a Bresenham
         * count, no division). Asked for during the first pass only, they came late and that
         * pass waited on memory (39% of the kernel's samples for a quarter of its FMAs); Xeon, 2
         * threads, ggml, 16 sequences, the two builds in turns: SmolLM2-135M F16 346-360 ->
         * 377-390 generated tokens/s, 110M F16 391-403 -> 460-467. Spread over every pass of a
         * 512-token window, the counting made 110M F16 perplexity 2-3% slower. With the T2 hint,
         * not T0: into L1 the prefetches waited for its line-fill buffers (110M F16, 16
         * sequences: 410-425 with T0, 429-438 with T2). */
        const char *next = (const char *)(w + (size_t)(r0 + 4) * row_bytes);
        size_t line = 0, owed = 0;
        for (int t0 = 0; t0 < x->tokens; t0 += 4) {
            const float *h = x->h + (size_t)t0 * hs;
            __m512 acc[PAIRS]; /* acc[4 r + t]: row r0 + r, token t0 + t */
            for (int i = 0; i < PAIRS; i++) acc[i] = _mm512_setzero_ps();
            for (int c = 0; c < full; c++) {
                if (t0 < spread)
                    for (owed += lines; owed >= steps; owed -= steps, line++)
                        _mm_prefetch(next + 64 * line, _MM_HINT_T2);
                four_by_four_chunk(acc, row, h, hs, c, 0xffff);
            }
            if (tail) four_by_four_chunk(acc, row, h, hs, full, tail);
            float sums[PAIRS];
            _mm512_storeu_ps(sums, tree_sums(acc));
            for (int r = 0; r < 4 && r0 + r < rows; r++)
                for (int t = 0; t < 4; t++) ct[(size_t)(r0 + r) * ldc + t0 + t] = sums[4 * r + t];
        }
    }
}

AVX512 void em_ggml_f16_tile_avx512(const uint8_t *w, size_t row_bytes, int rows,
                                    const em_q8_activations *x, float *ct, size_t ldc) {
    if (x->T == 1)
        one_token(w, row_bytes, rows, x, ct, ldc);
    else
        four_by_four(w, row_bytes, rows, x, ct, ldc);
}
#endif
