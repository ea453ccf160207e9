/* The `ggml` precision's dot products (stages/kernels/cpu/ggml_dot.h): every kernel of the table
 * this CPU runs (amx, avx512vnni, avxvnni, avx2; a row's empty columns as the selection fills
 * them in) gives the plain C kernel's bits on every type, for row counts, token counts and widths
 * that are not multiples of their tiles (avx2: 2 rows x 8 tokens; avx512vnni: 16 tokens, chunks
 * of 64 blocks, K-quants 16 rows and chunks of 4; avxvnni: chunks of 32 tokens in 1 to 4 groups
 * of 8 or 4, chunks of 32 blocks, K-quants chunks of 16 tokens in 1 or 2 groups, 16 rows and
 * chunks of 4 blocks; amx: 16 rows x 16 tokens, groups of 48 rows; F16: 16 rows of one token or
 * 4 x 4, rows of 16 values and 7 more), with random quants (every
 * bit pattern, Q8_0's -128 included) and random fp16 scales (MXFP4: E8M0 exponents, subnormal
 * scales included); the C kernel agrees with the same
 * products computed in double from the weights as the format's dequantizer gives them and the
 * activations as d * qs (plus, for Q4_1 and Q5_1, ggml's rounded block sum s in place of
 * d * sum(qs); for F16, the halves times the activations rounded to fp16), within 1e-5 relative
 * to the sum of the terms' magnitudes; F16's lanes add as its tree says; the activations'
 * rounding matches quantize_row_q8_1_ref and quantize_row_q8_K_ref on hand-picked blocks; a kernel
 * the CPU lacks is skipped with a message, and a wrong EVALMESH_CPU_KERNEL is refused (exit status
 * 2). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/half.h"
#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/ggml_dot.h"
#include "kernels/kernel_skip.h"
#include "test.h"

static uint32_t seed = 11;

static uint32_t random_u32(void) {
    seed = seed * 1664525u + 1013904223u;
    return seed;
}

static float random_float(void) { /* [-1, 1) */
    return (float)((int32_t)(random_u32() >> 8) - (1 << 23)) / (float)(1 << 23);
}

static const struct {
    em_tensor_type type;
    em_ggml_dot_type column;
    int values, bytes; /* per block */
    int d_at;          /* where its fp16 scale is (-1: IQ1_M's; -2: MXFP4's E8M0 byte at 0) */
    int min_at; /* where a second fp16 is (the minimum, or the K-quants' minima's scale), or 0 */
} types[] = {
    {EM_TENSOR_Q8_0, EM_GGML_DOT_Q8_0, 32, 34, 0, 0},
    {EM_TENSOR_Q4_0, EM_GGML_DOT_Q4_0, 32, 18, 0, 0},
    {EM_TENSOR_Q4_1, EM_GGML_DOT_Q4_1, 32, 20, 0, 2},
    {EM_TENSOR_Q5_0, EM_GGML_DOT_Q5_0, 32, 22, 0, 0},
    {EM_TENSOR_Q5_1, EM_GGML_DOT_Q5_1, 32, 24, 0, 2},
    {EM_TENSOR_Q6_K, EM_GGML_DOT_Q6_K, 256, 210, 208, 0},
    {EM_TENSOR_Q4_K, EM_GGML_DOT_Q4_K, 256, 144, 0, 2},
    {EM_TENSOR_Q5_K, EM_GGML_DOT_Q5_K, 256, 176, 0, 2},
    {EM_TENSOR_Q3_K, EM_GGML_DOT_Q3_K, 256, 110, 108, 0},
    {EM_TENSOR_Q2_K, EM_GGML_DOT_Q2_K, 256, 84, 80, 82},
    {EM_TENSOR_F16, EM_GGML_DOT_F16, 1, 2, 0, 0}, /* a "block" is one half */
    {EM_TENSOR_IQ4_NL, EM_GGML_DOT_IQ4_NL, 32, 18, 0, 0},
    {EM_TENSOR_IQ4_XS, EM_GGML_DOT_IQ4_XS, 256, 136, 0, 0},
    {EM_TENSOR_IQ2_XXS, EM_GGML_DOT_IQ2_XXS, 256, 66, 0, 0},
    {EM_TENSOR_IQ2_XS, EM_GGML_DOT_IQ2_XS, 256, 74, 0, 0},
    {EM_TENSOR_IQ2_S, EM_GGML_DOT_IQ2_S, 256, 82, 0, 0},
    {EM_TENSOR_IQ3_XXS, EM_GGML_DOT_IQ3_XXS, 256, 98, 0, 0},
    {EM_TENSOR_IQ3_S, EM_GGML_DOT_IQ3_S, 256, 110, 0, 0},
    {EM_TENSOR_IQ1_S, EM_GGML_DOT_IQ1_S, 256, 50, 0, 0},
    {EM_TENSOR_IQ1_M, EM_GGML_DOT_IQ1_M, 256, 56, -1, 0}, /* its fp16 d in 4 scale nibbles */
    {EM_TENSOR_TQ1_0, EM_GGML_DOT_TQ1_0, 256, 54, 52, 0},
    {EM_TENSOR_TQ2_0, EM_GGML_DOT_TQ2_0, 256, 66, 64, 0},
    {EM_TENSOR_MXFP4, EM_GGML_DOT_MXFP4, 32, 17, -2, 0},
};
#define TYPES (sizeof types / sizeof *types)

static void put_half(uint8_t *p, float f) {
    uint16_t h = em_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* rows x blocks random blocks of type i: random bytes, then fp16 scale (and minimum) in range;
 * MXFP4's exponent 2^-128 to 2^2, the subnormal scales (0, 1) included */
static uint8_t *random_rows(size_t i, int rows, int blocks) {
    size_t n = (size_t)rows * blocks * types[i].bytes;
    uint8_t *w = malloc(n);
    for (size_t k = 0; k < n; k++) w[k] = (uint8_t)(random_u32() >> 24);
    for (size_t b = 0; types[i].type == EM_TENSOR_F16 && b < (size_t)rows * blocks; b++)
        put_half(w + 2 * b, 2.0f * random_float()); /* finite halves */
    for (size_t b = 0; types[i].type != EM_TENSOR_F16 && b < (size_t)rows * blocks; b++) {
        uint8_t *blk = w + b * types[i].bytes;
        if (types[i].d_at == -2) {
            int r = (int)(random_u32() >> 28);
            blk[0] = (uint8_t)(r < 3 ? r : 115 + r);
            continue;
        }
        if (types[i].d_at < 0) { /* IQ1_M: d's nibble k in the top of scale word k (bytes 48..) */
            uint16_t d = em_f32_to_f16(0.02f * random_float());
            for (int k = 0; k < 4; k++)
                blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 15) | ((d >> (4 * k)) & 15) << 4);
            continue;
        }
        put_half(blk + types[i].d_at, 0.02f * random_float());
        if (types[i].min_at) put_half(blk + types[i].min_at, 0.1f * random_float());
    }
    return w;
}

/* x (T, K) packed in GEMM panels, quantized into q */
static float *quantized_activations(int T, int K, em_q8_activations *q) {
    float *x = malloc((size_t)T * K * sizeof(float));
    for (size_t k = 0; k < (size_t)T * K; k++) x[k] = 3.0f * random_float();
    float *xp = calloc(em_gemm_packed_floats(T, K), sizeof(float));
    for (int p = 0; p < em_gemm_panel_count(T); p++) em_gemm_pack_panel(x, (size_t)K, T, K, p, xp);
    CHECK(em_q8_reserve(q, T, K) == NULL);
    CHECK(em_q8_reserve_f16(q, T, K) == NULL);
    em_f16_round(em_gemm_packed(xp, T, K), T, K, 1, q);
    if (K % EM_Q8_BLOCK == 0) em_q8_quantize(em_gemm_packed(xp, T, K), T, K, 1, q);
    if (K % EM_Q8K_BLOCK == 0) {
        CHECK(em_q8_reserve_k_lanes(q, T, K, true, true) == NULL);
        em_q8k_quantize(em_gemm_packed(xp, T, K), T, K, 1, q);
    }
    free(xp);
    return x;
}

/* The C kernel's results against double sums of dequantized weights and activations. */
static void check_against_dequantized(size_t i, const uint8_t *w, int rows, int K,
                                      const em_q8_activations *q, const float *ct, size_t ldc) {
    em_tensor t = {.type = types[i].type, .data = w, .shape = {K, rows, 1, 1}};
    float *wf = malloc((size_t)rows * K * sizeof(float));
    em_rows_to_float(&t, 0, rows, wf, K);
    int bad = 0;
    for (int j = 0; j < rows; j++) {
        for (int tk = 0; tk < q->T; tk++) {
            double sum = 0.0, magnitude = 0.0;
            for (int k = 0; types[i].type == EM_TENSOR_F16 && k < K; k++) {
                double term = (double)wf[(size_t)j * K + k] * q->h[(size_t)tk * q->hstride + k];
                sum += term;
                magnitude += fabs(term);
            }
            bool k_form = em_ggml_dot_reads_q8k(types[i].column);
            int values = k_form ? EM_Q8K_BLOCK : EM_Q8_BLOCK;
            for (int b = 0; types[i].type != EM_TENSOR_F16 && b < K / values; b++) {
                size_t at = (size_t)b * q->tokens + tk;
                const uint8_t *blk = w + ((size_t)j * (K / values) + b) * types[i].bytes;
                double dx = k_form ? q->kd[at] : q->d[at];
                const int8_t *qs = k_form ? q->kqs + at * values : q->qs + at * values;
                for (int k = 0; k < values; k++) {
                    double term = (double)wf[(size_t)j * K + b * values + k] * dx * qs[k];
                    sum += term;
                    magnitude += fabs(term);
                }
                if (types[i].min_at && !k_form) { /* ggml uses m * s for m * dx * sum(qs) */
                    uint16_t h;
                    memcpy(&h, blk + 2, 2);
                    double m = em_f16_to_f32(h);
                    sum += m * ((double)q->s[at] - dx * q->sum[at]);
                }
            }
            double got = ct[(size_t)j * ldc + tk];
            if (!(fabs(got - sum) <= 1e-5 * (magnitude + 1e-30)) && bad++ < 3) /* NaN too */
                fprintf(stderr, "type %d row %d token %d: c %.9g, double %.9g\n",
                        (int)types[i].type, j, tk, got, sum);
        }
    }
    CHECK_INT_EQ(bad, 0);
    free(wf);
}

/* quantize_row_q8_1_ref on two blocks worked by hand */
static void check_rounding(void) {
    float x[32] = {0};
    x[0] = 1.27f;  /* amax: d = 0.01, id = 100 */
    x[1] = 0.005f; /* 0.5 rounds away from zero: 1 */
    x[2] = -0.005f;
    x[3] = -0.634f; /* -63.4: -63 */
    em_q8_activations q = {0};
    CHECK(em_q8_reserve(&q, 1, 32) == NULL);
    em_q8_quantize(em_gemm_packed(x, 1, 32), 1, 32, 1, &q); /* one token: x is its narrow panel */
    CHECK_INT_EQ(q.tokens, EM_Q8_TOKEN_STEP);
    CHECK_INT_EQ(q.qs[0], 127);
    CHECK_INT_EQ(q.qs[1], 1);
    CHECK_INT_EQ(q.qs[2], -1);
    CHECK_INT_EQ(q.qs[3], -63);
    CHECK_INT_EQ(q.sum[0], 127 + 1 - 1 - 63);
    float d = 1.27f / 127;
    CHECK(q.d[0] == em_f16_to_f32(em_f32_to_f16(d)));
    CHECK(q.s[0] == em_f16_to_f32(em_f32_to_f16(64.0f * d)));
    CHECK(q.d[1] == 0.0f && q.qs[EM_Q8_BLOCK] == 0); /* a padding token */
    em_q8_activations_free(&q);

    /* quantize_row_q8_K_ref: max -127 (the signed value of largest magnitude), iscale 1, halves
     * to even */
    float xk[256] = {[0] = 0.5f, [1] = 1.5f, [2] = 2.5f, [3] = -0.5f, [4] = -127.0f, [5] = 126.6f};
    CHECK(em_q8_reserve(&q, 1, 256) == NULL);
    em_q8k_quantize(em_gemm_packed(xk, 1, 256), 1, 256, 1, &q);
    int8_t want[6] = {0, 2, 2, 0, -127, 127};
    CHECK(memcmp(q.kqs, want, 6) == 0);
    CHECK(q.kd[0] == 1.0f);
    CHECK(q.kd[1] == 0.0f); /* a padding token */
    em_q8_activations_free(&q);
}

/* The F16 column adds its 16 lanes as a tree, lane l + 8 into lane l first: with a row of ones,
 * activations 32768 and -32768 in lanes 0 and 8 cancel before 2^-10 in lane 1 joins them, so the
 * result is 2^-10 (added in order, 32768 + 2^-10 would round the 2^-10 away). One token and 5
 * (the decoding step's tiles and the others), 1 and 19 rows. */
static void check_f16_tree_order(const em_ggml_kernel *k) {
    for (int T = 1; T <= 5; T += 4) {
        float x[5 * 16] = {0};
        for (int t = 0; t < T; t++) {
            x[16 * t] = 32768.0f;
            x[16 * t + 8] = -32768.0f;
            x[16 * t + 1] = 1.0f / 1024;
        }
        float *xp = calloc(em_gemm_packed_floats(T, 16), sizeof(float));
        for (int p = 0; p < em_gemm_panel_count(T); p++) em_gemm_pack_panel(x, 16, T, 16, p, xp);
        em_q8_activations q = {0};
        CHECK(em_q8_reserve_f16(&q, T, 16) == NULL);
        em_f16_round(em_gemm_packed(xp, T, 16), T, 16, 1, &q);
        uint8_t w[19 * 32];
        for (int i = 0; i < 19 * 16; i++) put_half(w + 2 * i, 1.0f);
        for (int rows = 1; rows <= 19; rows += 18) {
            float ct[19 * 8];
            k->tile[EM_GGML_DOT_F16](w, 32, rows, &q, ct, 8);
            for (int j = 0; j < rows; j++)
                for (int t = 0; t < T; t++) CHECK(ct[j * 8 + t] == 1.0f / 1024);
        }
        em_q8_activations_free(&q);
        free(xp);
    }
}

int main(void) {
    check_rounding();
    setenv("EVALMESH_CPU_KERNEL", "c", 1);
    const em_ggml_kernel *c = NULL;
    CHECK(em_ggml_kernel_select(&c) == NULL);
    CHECK_STR_EQ(c->name, "c");
    check_f16_tree_order(c);
    int row_counts[] = {1, 2, 3, 5, 8, 19, 53},
        token_counts[] = {1, 3, 4, 5, 9, 16, 17, 24, 25, 33}, widths[] = {32, 96, 288, 2080};
    const char *others[] = {"amx", "avx512vnni", "avxvnni", "avx2"};
    for (size_t o = 0; o < sizeof others / sizeof *others; o++) {
        setenv("EVALMESH_CPU_KERNEL", others[o], 1);
        const em_ggml_kernel *k = NULL;
        em_status err = em_ggml_kernel_select(&k);
        if (test_kernel_missing(err, others[o])) continue;
        CHECK_STR_EQ(k->name, others[o]);
        check_f16_tree_order(k);
        int shapes = 0;
        for (size_t i = 0; i < TYPES; i++) {
            for (size_t a = 0; a < sizeof row_counts / sizeof *row_counts; a++) {
                for (size_t b = 0; b < sizeof token_counts / sizeof *token_counts; b++) {
                    for (size_t e = 0; e < sizeof widths / sizeof *widths; e++) {
                        int rows = row_counts[a], T = token_counts[b];
                        int K = widths[e] * (types[i].values / 32); /* whole blocks */
                        if (types[i].type == EM_TENSOR_F16) K = widths[e] + 7 * (int)(e % 2);
                        em_q8_activations q = {0};
                        float *x = quantized_activations(T, K, &q);
                        uint8_t *w = random_rows(i, rows, K / types[i].values);
                        size_t ldc = (size_t)q.tokens + 3,
                               row_bytes = (size_t)K / types[i].values * types[i].bytes;
                        float *want = malloc((size_t)rows * ldc * sizeof(float));
                        float *got = malloc((size_t)rows * ldc * sizeof(float));
                        c->tile[types[i].column](w, row_bytes, rows, &q, want, ldc);
                        if (k->prepare) k->prepare(&q, 1 + (int)(b % 2)); /* 1 or 2 threads */
                        if (k->prepare_k && K % EM_Q8K_BLOCK == 0)
                            k->prepare_k(&q, true, true, 1 + (int)(b % 2));
                        k->tile[types[i].column](w, row_bytes, rows, &q, got, ldc);
                        int same = 1;
                        for (int j = 0; j < rows; j++)
                            same = same && memcmp(want + j * ldc, got + j * ldc,
                                                  (size_t)q.tokens * sizeof(float)) == 0;
                        if (!same)
                            fprintf(stderr,
                                    "kernel %s, type %d, rows %d, T %d, K %d: not c's bits\n",
                                    k->name, (int)types[i].type, rows, T, K);
                        CHECK(same);
                        check_against_dequantized(i, w, rows, K, &q, want, ldc);
                        shapes++;
                        free(want);
                        free(got);
                        free(w);
                        free(x);
                        em_q8_activations_free(&q);
                    }
                }
            }
        }
        printf("kernel %s: %d shapes of %zu types bit-identical to c\n", k->name, shapes, TYPES);
    }

    setenv("EVALMESH_CPU_KERNEL", "sse9", 1);
    const em_ggml_kernel *k = NULL;
    em_status err = em_ggml_kernel_select(&k);
    test_kernel_unknown_refused(err);
    return test_finish();
}
