/* The forward's cuBLASLt products (stages/kernels/cuda/gemm.cuh) on a GPU, for BF16, F16 and FP32
 * plans, projections (plain and accumulating) and the head:
 *   every plan is row-invariant by its own probe (em_gemm_row_invariant), and so is a generated
 *   forward's set (em_cuda_gemm_row_invariant);
 *   rows bit-identical whatever the product they are in: projections of T = 1, 7, 512 and
 *   2048 + 13 positions at offsets 0 and inside the input, against the same rows of the largest
 *   product; head stretches of n = 1, 7, 512 positions and 40 .. 1000 vocabulary rows likewise;
 *   a repeated product bit-identical;
 *   results within the worst-case FP32-accumulation bound of an FP64 host reference on sampled
 *   rows, whatever the summation order: |got - exact| <= 2 (n_in + 2) 2^-24 (sum_k |w_k x_k| + |c|)
 *   (n_in + 1 terms, the products exact in FP32 for BF16/F16 and rounded once for FP32; the factor
 *   2 allows tensor cores that truncate rather than round when they add);
 *   FP32 is the exact mode: 768 products of (1 + 2^-12) x 1 sum to 768.1875 exactly (every
 *   partial sum is representable in FP32), which TF32 inputs (10-bit mantissa) would make 768.
 * Exit 77 (skipped) when no CUDA device is usable. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/gemm.cuh"
extern "C" {
#include "stages/kernels/cuda/cuda_forward.h"
#include "test.h"
}

#define N_OUT 1000 /* weight rows (and the head's vocabulary) */
#define N_IN 768
#define T_MAX (2048 + 13)

/* The input types under test: one row per type, with its host rounding. */
static const struct tested_type {
    cudaDataType_t type;
    const char *name;
    int bytes;
} tested_types[] = {
    {CUDA_R_16BF, "BF16", 2},
    {CUDA_R_16F, "F16", 2},
    {CUDA_R_32F, "FP32", 4},
};

/* v rounded to type, as a float; stored into dst[i] of that type. */
static float store(const tested_type *t, void *dst, size_t i, float v) {
    if (t->type == CUDA_R_16BF) {
        __nv_bfloat16 b = __float2bfloat16_rn(v);
        ((__nv_bfloat16 *)dst)[i] = b;
        return __bfloat162float(b);
    }
    if (t->type == CUDA_R_16F) {
        __half h = __float2half_rn(v);
        ((__half *)dst)[i] = h;
        return __half2float(h);
    }
    ((float *)dst)[i] = v;
    return v;
}

static float uniform(uint32_t *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

static void *device_copy(const void *host, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes);
        exit(1);
    }
    if (host) cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    return d;
}

static bool ok(em_status err, const char *what) {
    if (!err) return true;
    fprintf(stderr, "%s: %s\n", what, err->message);
    em_error_free(err);
    test_failures++;
    return false;
}

/* The host data of one type: w (N_OUT, N_IN), x (T_MAX, N_IN), c (T_MAX, N_OUT) the values an
 * accumulating product adds onto; as floats (already rounded) and in the type on the device. */
typedef struct data {
    const tested_type *t;
    float *w, *x, *c;
    em_dmat dw;
    void *dx;
} data;

static void make_data(const tested_type *t, uint32_t seed, data *d) {
    d->t = t;
    d->w = (float *)malloc((size_t)N_OUT * N_IN * sizeof(float));
    d->x = (float *)malloc((size_t)T_MAX * N_IN * sizeof(float));
    d->c = (float *)malloc((size_t)T_MAX * N_OUT * sizeof(float));
    void *tw = malloc((size_t)N_OUT * N_IN * t->bytes),
         *tx = malloc((size_t)T_MAX * N_IN * t->bytes);
    for (size_t i = 0; i < (size_t)N_OUT * N_IN; i++) d->w[i] = store(t, tw, i, uniform(&seed));
    for (size_t i = 0; i < (size_t)T_MAX * N_IN; i++) d->x[i] = store(t, tx, i, uniform(&seed));
    for (size_t i = 0; i < (size_t)T_MAX * N_OUT; i++) d->c[i] = uniform(&seed);
    d->dw = em_dmat{t->type, device_copy(tw, (size_t)N_OUT * N_IN * t->bytes), N_OUT, N_IN, 0};
    d->dx = device_copy(tx, (size_t)T_MAX * N_IN * t->bytes);
    free(tw);
    free(tx);
}

static void free_data(data *d) {
    free(d->w);
    free(d->x);
    free(d->c);
    cudaFree(d->dw.data);
    cudaFree(d->dx);
}

/* Checks got = sum_k w[row j] x[position t] (+ c) against FP64 within the FP32 bound. */
static bool near_exact(const data *d, int j, int t, double c, float got) {
    double exact = c, magnitude = fabs(c);
    for (int k = 0; k < N_IN; k++) {
        double p = (double)d->w[(size_t)j * N_IN + k] * d->x[(size_t)t * N_IN + k];
        exact += p;
        magnitude += fabs(p);
    }
    double bound = 2.0 * (N_IN + 2) * ldexp(1.0, -24) * magnitude;
    if (fabs((double)got - exact) <= bound) return true;
    fprintf(stderr, "%s: output %d of position %d: %.9g, FP64 %.9g (bound %.3g)\n", d->t->name, j,
            t, got, exact, bound);
    return false;
}

/* The projection out (T, N_OUT) of x's positions [at, at + T), onto c's rows when accumulating;
 * the result copied to host (T, N_OUT). */
static bool project(em_gemm *g, const data *d, int T, int at, bool accumulate, float *dout,
                    float *host) {
    size_t bytes = (size_t)T * N_OUT * sizeof(float);
    if (accumulate) cudaMemcpy(dout, d->c + (size_t)at * N_OUT, bytes, cudaMemcpyHostToDevice);
    const char *in = (const char *)d->dx + (size_t)at * N_IN * d->t->bytes;
    if (!ok(em_gemm_project(g, &d->dw, in, T, dout, accumulate), "em_gemm_project")) return false;
    return cudaMemcpy(host, dout, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

static void check_projections(em_gemm *g, const data *d, bool accumulate) {
    float *dout = (float *)device_copy(NULL, (size_t)T_MAX * N_OUT * sizeof(float));
    float *full = (float *)malloc((size_t)T_MAX * N_OUT * sizeof(float));
    float *part = (float *)malloc((size_t)T_MAX * N_OUT * sizeof(float));
    if (project(g, d, T_MAX, 0, accumulate, dout, full)) {
        /* FP64 on sampled positions, every output */
        int bad = 0;
        for (int t = 0; t < T_MAX; t += (t < 8 ? 1 : 97))
            for (int j = 0; j < N_OUT; j++)
                bad += !near_exact(d, j, t, accumulate ? d->c[(size_t)t * N_OUT + j] : 0.0,
                                   full[(size_t)t * N_OUT + j]);
        CHECK_INT_EQ(bad, 0);
        /* the same positions in other products: T and offset */
        const int cases[][2] = {{1, 0},   {1, 1234},   {7, 0},    {7, 1500},
                                {512, 3}, {512, 1549}, {T_MAX, 0}};
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            int T = cases[i][0], at = cases[i][1];
            if (!project(g, d, T, at, accumulate, dout, part)) break;
            bool same = memcmp(part, full + (size_t)at * N_OUT, (size_t)T * N_OUT * 4) == 0;
            if (!same)
                fprintf(stderr, "%s projection%s: positions %d..%d differ with T = %d\n",
                        d->t->name, accumulate ? " (accumulating)" : "", at, at + T - 1, T);
            CHECK(same);
        }
    }
    free(full);
    free(part);
    cudaFree(dout);
}

/* The head's logits lt (rows, n) of vocabulary rows [row0, row0 + rows) for x's positions
 * [at, at + n), copied to host. */
static bool head(em_gemm *g, const data *d, int64_t row0, int rows, int n, int at, float *dlt,
                 float *host) {
    const char *in = (const char *)d->dx + (size_t)at * N_IN * d->t->bytes;
    if (!ok(em_gemm_head(g, &d->dw, row0, rows, in, n, dlt), "em_gemm_head")) return false;
    return cudaMemcpy(host, dlt, (size_t)rows * n * sizeof(float), cudaMemcpyDeviceToHost) ==
           cudaSuccess;
}

static void check_head(em_gemm *g, const data *d) {
    float *dlt = (float *)device_copy(NULL, (size_t)N_OUT * T_MAX * sizeof(float));
    float *full = (float *)malloc((size_t)N_OUT * T_MAX * sizeof(float));
    float *part = (float *)malloc((size_t)N_OUT * T_MAX * sizeof(float));
    if (head(g, d, 0, N_OUT, T_MAX, 0, dlt, full)) {
        int bad = 0;
        for (int t = 0; t < T_MAX; t += (t < 8 ? 1 : 211))
            for (int r = 0; r < N_OUT; r++)
                bad += !near_exact(d, r, t, 0.0, full[(size_t)r * T_MAX + t]);
        CHECK_INT_EQ(bad, 0);
        /* {n, at, row0, rows}: the same (row, position) logits in other stretches */
        const int cases[][4] = {{1, 0, 0, N_OUT},    {1, 777, 192, 384}, {7, 1500, 576, 424},
                                {7, 0, 960, 40},     {512, 3, 0, N_OUT}, {512, 1549, 384, 192},
                                {T_MAX, 0, 0, N_OUT}};
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            int n = cases[i][0], at = cases[i][1], row0 = cases[i][2], rows = cases[i][3];
            if (!head(g, d, row0, rows, n, at, dlt, part)) break;
            bool same = true;
            for (int r = 0; r < rows && same; r++)
                same = memcmp(part + (size_t)r * n, full + (size_t)(row0 + r) * T_MAX + at,
                              (size_t)n * 4) == 0;
            if (!same)
                fprintf(stderr, "%s head: rows %d.. of positions %d..%d differ with n = %d\n",
                        d->t->name, row0, at, at + n - 1, n);
            CHECK(same);
        }
    }
    free(full);
    free(part);
    cudaFree(dlt);
}

/* FP32 without TF32: W's rows all 1 + 2^-12 times a position of ones sum to 768.1875 exactly. */
static void check_exact_mode(em_gemm *g) {
    float *w = (float *)malloc((size_t)N_OUT * N_IN * sizeof(float)), ones[N_IN];
    for (size_t i = 0; i < (size_t)N_OUT * N_IN; i++) w[i] = 1.0f + ldexpf(1.0f, -12);
    for (int k = 0; k < N_IN; k++) ones[k] = 1.0f;
    em_dmat dw = {CUDA_R_32F, device_copy(w, (size_t)N_OUT * N_IN * sizeof(float)), N_OUT, N_IN, 0};
    void *dx = device_copy(ones, sizeof ones);
    float *dout = (float *)device_copy(NULL, N_OUT * sizeof(float)), out[N_OUT];
    if (ok(em_gemm_project(g, &dw, dx, 1, dout, false), "exact mode") &&
        cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess) {
        int wrong = 0;
        for (int j = 0; j < N_OUT; j++) wrong += out[j] != 768.1875f;
        if (wrong) fprintf(stderr, "FP32 exact mode: output 0 is %.9g, not 768.1875\n", out[0]);
        CHECK_INT_EQ(wrong, 0);
    }
    free(w);
    cudaFree(dw.data);
    cudaFree(dx);
    cudaFree(dout);
}

static void print_plans(em_gemm *g, const tested_type *t) {
    const em_gemm_shape shapes[] = {{EM_GEMM_PROJECTION, t->type, N_OUT, N_IN, false},
                                    {EM_GEMM_PROJECTION, t->type, N_OUT, N_IN, true},
                                    {EM_GEMM_HEAD, t->type, 0, N_IN, false}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const em_gemm_plan *p = NULL;
        char text[512];
        if (!ok(em_gemm_plan_for(g, &shapes[i], &p), "plan")) continue;
        em_gemm_plan_describe(p, text, sizeof text);
        printf("plan: %s\n", text);
    }
}

/* A small generated BF16 forward: all its products' plans row-invariant. */
static void check_forward_plans(void) {
    em_llama_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.architecture, sizeof c.architecture, "llama");
    c.n_vocab = N_OUT;
    c.dim = 256;
    c.n_layers = 2;
    c.ffn_dim = 688;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 64;
    c.rope_dim = 64;
    c.n_ctx_train = 4096;
    c.rope_freq_base = 10000.0f;
    c.rope_scaling = EM_ROPE_SCALING_NONE;
    c.rms_eps = 1e-5f;
    c.activation = EM_ACTIVATION_SILU;
    c.embed_scale = 1.0f;
    c.attn_scale_base = c.head_dim;
    void *f = NULL;
    if (!ok(em_cuda_forward_new_random(&c, 7, EM_TENSOR_BF16, 1, &f), "generated forward")) return;
    char reason[1024] = "";
    bool invariant = em_cuda_gemm_row_invariant(f, reason, sizeof reason);
    if (!invariant) fprintf(stderr, "generated forward: %s\n", reason);
    CHECK(invariant);
    em_forward_backend_cuda.free(f);
}

int main(void) {
    em_status err = em_cuda_available();
    if (err) TEST_SKIP("%s", err->message);
    em_gemm *g = NULL;
    if (!ok(em_gemm_new(0, &g), "em_gemm_new")) return test_finish();
    for (size_t i = 0; i < sizeof tested_types / sizeof *tested_types; i++) {
        data d;
        make_data(&tested_types[i], 11u + (uint32_t)i, &d);
        check_projections(g, &d, false);
        check_projections(g, &d, true);
        check_head(g, &d);
        print_plans(g, &tested_types[i]);
        free_data(&d);
    }
    check_exact_mode(g);
    char reason[1024] = "";
    bool invariant = em_gemm_row_invariant(g, reason, sizeof reason);
    if (!invariant) fprintf(stderr, "plans: %s\n", reason);
    CHECK(invariant);
    em_gemm_free(g);
    check_forward_plans();
    printf("%s\n", test_failures ? "FAILED: cuBLASLt products" : "ok: cuBLASLt products");
    return test_finish();
}
