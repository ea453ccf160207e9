/* The `bf16` precision's kernels (stages/kernels/cpu/bf16_dot.h):
 * - em_bf16_round against AVX512-BF16's VCVTNE2PS2BF16 on 16 million random floats of every
 *   exponent (denormals, ties and the largest values included), and the C kernel's one step of a
 *   pair from a given accumulator against VDPBF16PS on 4 million random pairs (ordinary values,
 *   cancellations, the whole exponent range, products and sums near the denormal range): the order
 *   and the flushes bf16_dot.h defines are the instruction's. Skipped with a message on a CPU
 *   without avx512_bf16.
 * - every kernel of the table this CPU runs gives the C kernel's bits through the whole tile
 *   product (its own rounding of weights and activations, its microkernel or, for one token, its
 *   one_token, blocks of k), for row, token and column counts that are not multiples of its tiles
 *   (one_token's groups of 16 rows and passes of 64 too), a width over two blocks of k and odd
 *   widths; the C kernel agrees with the chain written out here from em_bf16_round.
 * - every kernel's round_stored_rows rounds every half (F16), every BF16 bit pattern and random
 *   floats of every kind (F32) exactly, in its format (2 words a pair for avx512: floats, the odd
 *   value first).
 * - EVALMESH_CPU_KERNEL: c, avx512bf16 and avx512 (or their skips), the GEMM's avx2 taking the
 *   best, the best being avx512 on a CPU with AMX-BF16 (VDPBF16PS outpaced) and avx512bf16 on
 *   others that have it, and a wrong name refused (exit status 2). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/dequantize_rows.h"
#include "stages/kernels/cpu/bf16_dot.h"
#include "kernels/kernel_skip.h"
#include "test.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static uint64_t state = 88172645463325252ull;

static uint64_t random_u64(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* A float of random sign and mantissa with a biased exponent in [lo, hi]. */
static float random_float(int lo, int hi) {
    uint64_t r = random_u64();
    uint32_t e = (uint32_t)(lo + (int)(r % (uint64_t)(hi - lo + 1)));
    return float_of((uint32_t)(r >> 20 & 1) << 31 | e << 23 | (uint32_t)(r >> 30 & 0x7fffff));
}

/* A BF16 value the same way. */
static uint16_t random_bf16(int lo, int hi) {
    return (uint16_t)(bits_of(random_float(lo, hi)) >> 16);
}

/* A float that exercises the rounding: any bits, ties, denormals, values next to the largest. */
static float rounding_case(void) {
    uint64_t r = random_u64();
    uint32_t u = (uint32_t)(r >> 32);
    switch (r % 4) {
    case 0:
        return float_of((u & 0xffff0000u) | 0x8000u); /* a tie */
    case 1:
        return float_of(u & 0x807fffffu); /* a denormal or zero */
    case 2:
        return float_of((u | 0x7f000000u) & ~0x00800000u); /* near the largest */
    default:
        return float_of(u);
    }
}

/* The exponent ranges of a round's cases (kind 0 ordinary, 1 cancelling, 2 any exponent, 3 the
 * bottom of the normal range): x of a token, w of a row, the accumulators. */
static const int ranges[4][6] = {
    {110, 140, 110, 140, 100, 150},
    {120, 130, 120, 130, 90, 135},
    {1, 254, 1, 254, 1, 254},
    {1, 70, 55, 70, 1, 6},
};

/* One round's case of kind `kind` (see ranges): x per token, w per row, the accumulators ct. In
 * the cancelling rounds token t's pair is made so that its two products with row t % 12's nearly
 * cancel (within a few ulps). */
static void pair_case(int kind, uint32_t xb[EM_GEMM_TOKENS], uint32_t wb[EM_GEMM_ROWS],
                      float ct[EM_GEMM_ROWS * EM_GEMM_TOKENS]) {
    const int *e = ranges[kind];
    for (int j = 0; j < EM_GEMM_ROWS; j++)
        wb[j] = em_bf16_pair(random_bf16(e[2], e[3]), random_bf16(e[2], e[3]));
    for (int t = 0; t < EM_GEMM_TOKENS; t++) {
        uint16_t x0 = random_bf16(e[0], e[1]), x1 = random_bf16(e[0], e[1]);
        if (kind == 1) { /* x1 w1 = -(x0 w0), rounded to BF16, then moved a few ulps */
            uint32_t w = wb[t % EM_GEMM_ROWS];
            float w0 = em_bf16_value((uint16_t)w), w1 = em_bf16_value((uint16_t)(w >> 16));
            x1 = em_bf16_round(-em_bf16_value(x0) * w0 / w1);
            x1 = (uint16_t)(x1 + (int)(random_u64() % 5) - 2);
        }
        xb[t] = em_bf16_pair(x0, x1);
    }
    for (int i = 0; i < EM_GEMM_ROWS * EM_GEMM_TOKENS; i++) {
        ct[i] = kind == 3 && random_u64() % 4 == 0 ? 0.0f : random_float(e[4], e[5]);
        if (!isfinite(ct[i])) ct[i] = 1.0f;
    }
}

/* One step from the accumulators over one pair through each kernel's microkernel (its own
 * format: 2 words a pair are the two values' floats, the odd one first) against the C kernel's,
 * on the rounds of check_pair_instruction: where the FMA kernel's flush-to-zero meets ftz. */
static void check_pair_kernels(void) {
    const char *others[] = {"avx512bf16", "avx512"};
    for (size_t o = 0; o < sizeof others / sizeof *others; o++) {
        setenv("EVALMESH_CPU_KERNEL", others[o], 1);
        const em_bf16_kernel *k = NULL;
        if (test_kernel_missing(em_bf16_kernel_select(&k), others[o])) continue;
        long differ = 0, steps = 0;
        for (int round = 0; round < 4000; round++) {
            uint32_t xb[EM_GEMM_TOKENS], wb[EM_GEMM_ROWS];
            float ct[EM_GEMM_ROWS * EM_GEMM_TOKENS], want[EM_GEMM_ROWS * EM_GEMM_TOKENS];
            pair_case(round % 4, xb, wb, ct);
            const uint32_t *rows[EM_GEMM_ROWS];
            for (int j = 0; j < EM_GEMM_ROWS; j++) rows[j] = &wb[j];
            memcpy(want, ct, sizeof ct);
            em_bf16_kernel_c.microkernel(1, xb, EM_GEMM_PANEL, 2, rows, want, EM_GEMM_TOKENS,
                                         false);
            /* the kernel's format: a panel is its pair's words_per_pair rows of 16 tokens */
            uint32_t kx[2 * EM_GEMM_TOKENS], kw[EM_GEMM_ROWS][2];
            int words = k->words_per_pair;
            for (int t = 0; t < EM_GEMM_TOKENS; t++) {
                uint32_t *panel = kx + (t / EM_GEMM_PANEL) * words * EM_GEMM_PANEL;
                if (words == 1) {
                    panel[t % EM_GEMM_PANEL] = xb[t];
                } else {
                    panel[t % EM_GEMM_PANEL] = xb[t] & 0xffff0000u;
                    panel[EM_GEMM_PANEL + t % EM_GEMM_PANEL] = xb[t] << 16;
                }
            }
            for (int j = 0; j < EM_GEMM_ROWS; j++) {
                kw[j][0] = words == 1 ? wb[j] : wb[j] & 0xffff0000u;
                kw[j][1] = wb[j] << 16;
                rows[j] = kw[j];
            }
            k->microkernel(1, kx, (size_t)words * EM_GEMM_PANEL, 2, rows, ct, EM_GEMM_TOKENS,
                           false);
            for (int i = 0; i < EM_GEMM_ROWS * EM_GEMM_TOKENS; i++) {
                if (!isfinite(want[i])) continue; /* overflow: not a case of the forward */
                steps++;
                if (bits_of(ct[i]) != bits_of(want[i]) && differ++ < 5)
                    fprintf(stderr, "kernel %s pair step: %a, c kernel %a\n", k->name,
                            (double)ct[i], (double)want[i]);
            }
        }
        CHECK(differ == 0);
        printf("kernel %s: %ld pair steps from given sums, %ld differ from c's\n", k->name, steps,
               differ);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) static void check_rounding_instruction(void) {
    long differ = 0;
    for (long n = 0; n < (1l << 24); n += 32) {
        float v[32];
        uint16_t got[32];
        for (int i = 0; i < 32; i++) v[i] = rounding_case();
        __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(v + 16), _mm512_loadu_ps(v));
        memcpy(got, &h, sizeof got);
        for (int i = 0; i < 32; i++) {
            bool nan = isnan(v[i]); /* either quiet NaN will do */
            if (nan ? (got[i] & 0x7fc0) != 0x7fc0 : got[i] != em_bf16_round(v[i])) {
                if (differ++ < 5)
                    fprintf(stderr, "round %08x: instruction %04x, em_bf16_round %04x\n",
                            bits_of(v[i]), got[i], em_bf16_round(v[i]));
            }
        }
    }
    CHECK(differ == 0);
    printf("em_bf16_round: 16777216 floats, %ld differ from VCVTNE2PS2BF16\n", differ);
}

/* One step from acc over pair (x, w) by the C kernel (pairs = 1, first false) and by VDPBF16PS,
 * on the 12 rows x 32 tokens of a microkernel call (pair_case). */
__attribute__((target("avx512f,avx512bf16"))) static void check_pair_instruction(void) {
    long differ = 0, pairs = 0, per_kind[4] = {0};
    for (int round = 0; round < 10000; round++) {
        int kind = round % 4;
        uint32_t xb[EM_GEMM_TOKENS], wb[EM_GEMM_ROWS];
        float ct[EM_GEMM_ROWS * EM_GEMM_TOKENS], want[EM_GEMM_ROWS * EM_GEMM_TOKENS];
        pair_case(kind, xb, wb, ct);
        const uint32_t *rows[EM_GEMM_ROWS];
        for (int j = 0; j < EM_GEMM_ROWS; j++) rows[j] = &wb[j];
        memcpy(want, ct, sizeof ct);
        em_bf16_kernel_c.microkernel(1, xb, EM_GEMM_PANEL, 2, rows, want, EM_GEMM_TOKENS, false);
        for (int j = 0; j < EM_GEMM_ROWS; j++) {
            for (int p = 0; p < 2; p++) {
                __m512 acc = _mm512_loadu_ps(ct + j * EM_GEMM_TOKENS + p * EM_GEMM_PANEL);
                __m512bh x = (__m512bh)_mm512_loadu_si512(xb + p * EM_GEMM_PANEL);
                __m512bh w = (__m512bh)_mm512_set1_epi32((int)wb[j]);
                float got[EM_GEMM_PANEL];
                _mm512_storeu_ps(got, _mm512_dpbf16_ps(acc, x, w));
                for (int t = 0; t < EM_GEMM_PANEL; t++) {
                    int at = j * EM_GEMM_TOKENS + p * EM_GEMM_PANEL + t;
                    if (!isfinite(got[t])) continue; /* overflow: not a case of the forward */
                    pairs++;
                    if (bits_of(got[t]) != bits_of(want[at])) {
                        per_kind[kind]++;
                        if (differ++ < 5)
                            fprintf(stderr, "pair step: instruction %a, c kernel %a\n",
                                    (double)got[t], (double)want[at]);
                    }
                }
            }
        }
    }
    CHECK(differ == 0);
    CHECK(pairs > 3000000);
    printf("pair steps: %ld, %ld differ from VDPBF16PS (ordinary %ld, cancelling %ld, any exponent "
           "%ld, tiny %ld)\n",
           pairs, differ, per_kind[0], per_kind[1], per_kind[2], per_kind[3]);
}
#endif

/* Row w times token x as bf16_dot.h writes the chain, from em_bf16_round alone. */
static float chain(const float *x, const float *w, int K) {
    float acc = 0.0f;
    for (int i = 0; i < (K + 1) / 2; i++) {
        float x0 = em_bf16_value(em_bf16_round(x[2 * i])),
              w0 = em_bf16_value(em_bf16_round(w[2 * i]));
        float x1 = 2 * i + 1 < K ? em_bf16_value(em_bf16_round(x[2 * i + 1])) : 0.0f;
        float w1 = 2 * i + 1 < K ? em_bf16_value(em_bf16_round(w[2 * i + 1])) : 0.0f;
        acc = fmaf(x1, w1, acc);
        if (fabsf(acc) < 0x1p-126f) acc = copysignf(0.0f, acc);
        acc = fmaf(x0, w0, acc);
        if (fabsf(acc) < 0x1p-126f) acc = copysignf(0.0f, acc);
    }
    return acc;
}

/* ct of the tile product of rows weight rows (K floats each) and T tokens through kernel k. */
static float *tile_product(const em_bf16_kernel *k, const float *w, const float *x, int rows, int T,
                           int K, size_t *ldc) {
    /* x packed as the forward packs it (T <= 4: one narrow panel), then as BF16 panels */
    float *xp = malloc((size_t)em_gemm_panel_count(T) * em_gemm_panel_width(T) * K * sizeof(float));
    for (int p = 0; p < em_gemm_panel_count(T); p++) em_gemm_pack_panel(x, (size_t)K, T, K, p, xp);
    uint32_t *xb = malloc(em_bf16_packed_words(k, T, K) * sizeof(uint32_t));
    for (int p = 0; p < em_gemm_padded_tokens(T) / EM_GEMM_PANEL; p++)
        k->pack_panel(em_gemm_packed(xp, T, K), K, p, em_gemm_panel_tokens(T, p), xb);
    size_t ldw = (size_t)K + EM_GEMM_ROW_PAD;
    float *wt = malloc((size_t)rows * ldw * sizeof(float));
    for (int j = 0; j < rows; j++)
        memcpy(wt + j * ldw, w + (size_t)j * K, (size_t)K * sizeof(float));
    k->round_rows(wt, ldw, rows, K);
    *ldc = em_gemm_result_stride(T);
    float *ct = malloc((size_t)em_gemm_padded_rows(rows) * *ldc * sizeof(float));
    em_bf16_tile(k, xb, T, K, (const uint32_t *)wt, em_bf16_row_stride(k, K), rows, ct, *ldc);
    free(xp);
    free(xb);
    free(wt);
    return ct;
}

/* Values of one of three scales, so that sums cancel and exponents differ along a row. */
static float value(void) {
    uint64_t r = random_u64();
    float v = (float)(r >> 40) / 8388608.0f - 1.0f;
    return r % 3 == 0 ? v * 1e-3f : r % 3 == 1 ? v * 37.0f : v;
}

static void check_kernels(void) {
    int row_counts[] = {1, 5, 13, 17, 48, 75}, token_counts[] = {1, 3, 16, 17, 33, 70},
        widths[] = {1, 2, 7, 64, 255, 1100};
    const char *others[] = {"avx512bf16", "avx512"};
    for (size_t o = 0; o < sizeof others / sizeof *others; o++) {
        setenv("EVALMESH_CPU_KERNEL", others[o], 1);
        const em_bf16_kernel *k = NULL;
        if (test_kernel_missing(em_bf16_kernel_select(&k), others[o])) continue;
        CHECK_STR_EQ(k->name, others[o]);
        int shapes = 0;
        for (int a = 0; a < 6; a++) {
            for (int b = 0; b < 6; b++) {
                for (int e = 0; e < 6; e++) {
                    int rows = row_counts[a], T = token_counts[b], K = widths[e];
                    float *w = malloc((size_t)rows * K * sizeof(float));
                    float *x = malloc((size_t)T * K * sizeof(float));
                    for (int i = 0; i < rows * K; i++) w[i] = value();
                    for (int i = 0; i < T * K; i++) x[i] = value();
                    size_t ldc;
                    float *want = tile_product(&em_bf16_kernel_c, w, x, rows, T, K, &ldc);
                    float *got = tile_product(k, w, x, rows, T, K, &ldc);
                    int same = 1, chained = 1;
                    for (int j = 0; j < rows; j++) {
                        same = same && memcmp(want + j * ldc, got + j * ldc,
                                              (size_t)T * sizeof(float)) == 0;
                        for (int t = 0; t < T; t++)
                            chained = chained &&
                                      bits_of(want[j * ldc + t]) ==
                                          bits_of(chain(x + (size_t)t * K, w + (size_t)j * K, K));
                    }
                    if (!same || !chained)
                        fprintf(stderr, "kernel %s, rows %d, T %d, K %d: %s\n", k->name, rows, T, K,
                                same ? "c is not the chain" : "not c's bits");
                    CHECK(same);
                    CHECK(chained);
                    shapes++;
                    free(want);
                    free(got);
                    free(w);
                    free(x);
                }
            }
        }
        printf("kernel %s: %d shapes bit-identical to c, c equal to the written-out chain\n",
               k->name, shapes);
    }
}

/* The BF16 bits of value c of row j of kernel k's rounded rows (row stride `stride` words): a
 * pair's half, or (2 words a pair, the odd value first) the top of its float. */
static uint16_t rounded_value(const em_bf16_kernel *k, const uint32_t *wt, size_t stride, int j,
                              int c) {
    const uint32_t *row = wt + (size_t)j * stride;
    if (k->words_per_pair == 1) return (uint16_t)(c % 2 ? row[c / 2] >> 16 : row[c / 2]);
    return (uint16_t)(row[c ^ 1] >> 16);
}

/* Weight rows of K stored values (row_bytes past the values) through each kernel's
 * round_stored_rows: every one of the 65,536 halves as F16 and bit patterns as BF16, and 65,536
 * floats of rounding_case as F32; each value's bits em_bf16_round(its exact float), a NaN a NaN of
 * its sign, the K odd pair's second value 0, for row lengths that end inside 16- and 32-value
 * steps. */
static void check_stored_rows(void) {
    const em_bf16_kernel *kernels[] = {
        &em_bf16_kernel_c,
#if defined(__x86_64__)
        &em_bf16_kernel_avx512bf16,
        &em_bf16_kernel_avx512,
#endif
    };
    const em_tensor_type types[] = {EM_TENSOR_F16, EM_TENSOR_BF16, EM_TENSOR_F32};
    int widths[] = {1, 7, 16, 33, 576, 1001};
    for (size_t n = 0; n < sizeof kernels / sizeof *kernels; n++) {
        const em_bf16_kernel *k = kernels[n];
        if (!k->runs_here()) {
            printf("kernel %s: not on this CPU, its stored rows skipped\n", k->name);
            continue;
        }
        for (size_t y = 0; y < sizeof types / sizeof *types; y++) {
            em_tensor_type type = types[y];
            size_t size = type == EM_TENSOR_F32 ? 4 : 2;
            int wrong = 0, values = 0;
            for (size_t e = 0; e < sizeof widths / sizeof *widths; e++) {
                int K = widths[e], rows = (65536 + K - 1) / K;
                size_t row_bytes = size * (size_t)K + 6, stride = em_bf16_row_stride(k, K);
                uint8_t *data = malloc((size_t)rows * row_bytes);
                uint32_t *wt = malloc((size_t)rows * stride * sizeof(uint32_t));
                for (int j = 0; j < rows; j++)
                    for (int c = 0; c < K; c++) {
                        uint8_t *at = data + (size_t)j * row_bytes + size * (size_t)c;
                        uint16_t bits = (uint16_t)((j * K + c) & 0xffff);
                        float f = rounding_case();
                        memcpy(at, size == 2 ? (const void *)&bits : (const void *)&f, size);
                    }
                k->round_stored_rows(type, data, row_bytes, rows, K, wt);
                for (int j = 0; j < rows; j++)
                    for (int c = 0; c < 2 * em_bf16_pairs(K); c++) {
                        uint16_t got = rounded_value(k, wt, stride, j, c);
                        float f =
                            c < K ? em_bf16_stored_value(type, data + (size_t)j * row_bytes, c) : 0;
                        values++;
                        if (isnan(f)) /* only that it stays a NaN of its sign */
                            wrong += !((got & 0x7f80) == 0x7f80 && (got & 0x7f) &&
                                       !(got & 0x8000) == !signbit(f));
                        else
                            wrong += got != em_bf16_round(f);
                    }
                free(data);
                free(wt);
            }
            if (wrong)
                fprintf(stderr, "kernel %s: %d %s values rounded wrong\n", k->name, wrong,
                        em_tensor_type_name(type));
            CHECK(wrong == 0);
            if (!wrong)
                printf("kernel %s: %d %s values (6 row lengths) rounded to BF16 exactly\n", k->name,
                       values, em_tensor_type_name(type));
        }
    }
}

int main(void) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")) {
        check_rounding_instruction();
        check_pair_instruction();
    } else {
        printf("avx512_bf16: not on this CPU, the rounding and pair checks against the "
               "instructions skipped\n");
    }
#endif
    check_pair_kernels();
    check_kernels();
    check_stored_rows();
    setenv("EVALMESH_CPU_KERNEL", "c", 1);
    const em_bf16_kernel *k = NULL;
    CHECK(em_bf16_kernel_select(&k) == NULL && k == &em_bf16_kernel_c);
    setenv("EVALMESH_CPU_KERNEL", "avx2", 1); /* the GEMM's: this table's best */
    CHECK(em_bf16_kernel_select(&k) == NULL && k != NULL);
#if defined(__x86_64__)
    unsetenv("EVALMESH_CPU_KERNEL"); /* the best: avx512 where AMX-BF16 outpaces avx512bf16 */
    CHECK(em_bf16_kernel_select(&k) == NULL);
    if (em_bf16_kernel_avx512bf16.runs_here() && __builtin_cpu_supports("amx-bf16"))
        CHECK_STR_EQ(k->name, "avx512");
    else if (em_bf16_kernel_avx512bf16.runs_here())
        CHECK_STR_EQ(k->name, "avx512bf16");
    printf("the best kernel here: %s\n", k->name);
#endif
    setenv("EVALMESH_CPU_KERNEL", "sse9", 1);
    test_kernel_unknown_refused(em_bf16_kernel_select(&k));
    return test_finish();
}
