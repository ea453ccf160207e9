/* The forward's matrix products through cuBLASLt: plans with one fixed algorithm per shape, the
 * row-invariance probe that picks it, and the products themselves (see gemm.cuh).
 *
 * In cuBLASLt's column-major terms every product is D (M, N) = A^T B (+ D) with A (K, M) and
 * B (K, N) of the plan's type, both with leading dimension K, and D FP32 with leading dimension M:
 *   projection: A = w (M = n_out), B = in (N = T), D = out, i.e. out (T, n_out) row-major;
 *   head:       A = in (M = n positions), B = w's rows (N = rows), D = lt, i.e. lt (rows, n). */
#include "stages/kernels/cuda/gemm.cuh"

#include <cublasLt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKSPACE_BYTES ((size_t)32 << 20) /* the context's one workspace */
#define CANDIDATES 16                      /* heuristic results tried per plan, best first */
#define ALIGNMENT 16                       /* bytes every pointer of a product is aligned to */
/* The sizes the heuristic chooses for: a projection's T; the head's positions (odd, as the
 * logits' leading dimension is n: the algorithm must take any n) and vocabulary rows. */
#define REPRESENTATIVE_T 2048
#define REPRESENTATIVE_HEAD_N 2047
#define REPRESENTATIVE_HEAD_ROWS 32768
/* The probe: a block of PROBE_ROWS positions alone and at PROBE_AT inside PROBE_T positions;
 * for the head also a block of PROBE_VOCAB vocabulary rows alone and at PROBE_VOCAB_AT inside
 * PROBE_VOCAB_TOTAL rows. Odd sizes and offsets, so no tile boundary lines up. */
#define PROBE_ROWS 13
#define PROBE_T (2048 + 13)
#define PROBE_AT 1029
#define PROBE_VOCAB 200
#define PROBE_VOCAB_TOTAL (4096 + 200)
#define PROBE_VOCAB_AT 1931

/* The input types a plan takes: one row per type. */
static const struct gemm_type {
    cudaDataType_t type;
    const char *name;
    int bytes;
} gemm_types[] = {
    {CUDA_R_16BF, "BF16", 2},
    {CUDA_R_16F, "F16", 2},
    {CUDA_R_32F, "FP32", 4},
};

static const gemm_type *type_row(cudaDataType_t type) {
    for (size_t i = 0; i < sizeof gemm_types / sizeof *gemm_types; i++)
        if (gemm_types[i].type == type) return &gemm_types[i];
    return NULL;
}

struct em_gemm_plan {
    em_gemm_shape shape;
    cublasLtMatmulDescOpaque_t desc;
    cublasLtMatmulAlgo_t algo;
    size_t workspace; /* bytes the algorithm needs at the representative size */
    bool row_invariant;
    char why[256];     /* why it is not row-invariant */
    uint64_t *checked; /* sizes (M << 32 | N) cublasLtMatmulAlgoCheck accepted, ascending */
    size_t n_checked, cap_checked;
};

struct em_gemm {
    cublasLtHandle_t lt;
    cudaStream_t stream;
    void *workspace; /* WORKSPACE_BYTES */
    em_gemm_plan **plans;
    int n_plans;
};

/* The three matrix layouts of one product of M x N. */
typedef struct gemm_layouts {
    cublasLtMatrixLayoutOpaque_t a, b, d;
} gemm_layouts;

static void shape_text(const em_gemm_shape *s, char *buf, size_t size) {
    const gemm_type *t = type_row(s->type);
    if (s->kind == EM_GEMM_HEAD)
        snprintf(buf, size, "%s head product (n_in %lld)", t ? t->name : "?", (long long)s->n_in);
    else
        snprintf(buf, size, "%s projection (n_out %lld, n_in %lld%s)", t ? t->name : "?",
                 (long long)s->n_out, (long long)s->n_in, s->accumulate ? ", accumulating" : "");
}

static em_status lt_error(cublasStatus_t s, const em_gemm_shape *shape, const char *what) {
    char text[96];
    shape_text(shape, text, sizeof text);
    return em_error_new(EM_EXIT_RUNTIME, "cuBLASLt: %s of the %s: %s", what, text,
                        cublasLtGetStatusString(s));
}

static em_status cuda_failure(cudaError_t e, const char *what) {
    return em_error_new(EM_EXIT_RUNTIME, "cuda: %s: %s", what, cudaGetErrorString(e));
}

static cublasStatus_t make_layouts(const em_gemm_shape *s, int64_t M, int64_t N, gemm_layouts *l) {
    cublasStatus_t st =
        cublasLtMatrixLayoutInit(&l->a, s->type, (uint64_t)s->n_in, (uint64_t)M, s->n_in);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutInit(&l->b, s->type, (uint64_t)s->n_in, (uint64_t)N, s->n_in);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatrixLayoutInit(&l->d, CUDA_R_32F, (uint64_t)M, (uint64_t)N, M);
    return st;
}

/* D (M, N) = A^T B (+ D) with the plan's descriptor and the given algorithm, on the stream. */
static cublasStatus_t matmul(em_gemm *g, em_gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
                             int64_t M, int64_t N, const void *a, const void *b, float *d) {
    gemm_layouts l;
    cublasStatus_t st = make_layouts(&p->shape, M, N, &l);
    float alpha = 1.0f, beta = p->shape.accumulate ? 1.0f : 0.0f;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(g->lt, &p->desc, &alpha, a, &l.a, b, &l.b, &beta, d, &l.d, d, &l.d,
                            algo, g->workspace, WORKSPACE_BYTES, g->stream);
    return st;
}

/* cublasLtMatmulAlgoCheck of an algorithm at M x N within the workspace. */
static cublasStatus_t algo_check(em_gemm *g, em_gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
                                 int64_t M, int64_t N, size_t *workspace) {
    gemm_layouts l;
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    cublasStatus_t st = make_layouts(&p->shape, M, N, &l);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoCheck(g->lt, &p->desc, &l.a, &l.b, &l.d, &l.d, algo, &r);
    if (st == CUBLAS_STATUS_SUCCESS && r.workspaceSize > WORKSPACE_BYTES)
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (workspace) *workspace = r.workspaceSize;
    return st;
}

/* A value uniform in [-1, 1) with 24 significant bits from a hash of (seed, row, column). */
static __device__ float probe_value(uint32_t seed, uint32_t row, uint32_t col) {
    uint32_t h = seed * 0x9E3779B9u ^ row * 0x85EBCA6Bu ^ col * 0xC2B2AE35u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    h *= 0x846CA68Bu;
    h ^= h >> 16;
    return (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

/* m (rows, cols) column-major of type: element (r, c) = probe_value(seed, r - row_at, c - col_at),
 * so a block placed at (row_at, col_at) holds the same values wherever it is placed. */
static __global__ void fill_probe_kernel(void *m, cudaDataType_t type, int64_t rows, int64_t cols,
                                         int64_t row_at, int64_t col_at, uint32_t seed) {
    int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i % rows, c = i / rows;
        float v = probe_value(seed, (uint32_t)(r - row_at), (uint32_t)(c - col_at));
        if (type == CUDA_R_32F)
            ((float *)m)[i] = v;
        else if (type == CUDA_R_16F)
            ((__half *)m)[i] = __float2half_rn(v);
        else
            ((__nv_bfloat16 *)m)[i] = __float2bfloat16_rn(v);
    }
}

static void fill_probe(em_gemm *g, void *m, cudaDataType_t type, int64_t rows, int64_t cols,
                       int64_t row_at, int64_t col_at, uint32_t seed) {
    int64_t n = rows * cols, blocks = (n + 255) / 256;
    fill_probe_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, g->stream>>>(
        m, type, rows, cols, row_at, col_at, seed);
}

/* One dimension of the probe: a block of `block` at `at` inside `total`; a dimension that does
 * not vary (a projection's n_out) is the block alone, at 0. */
typedef struct probe_dim {
    int64_t block, at, total;
    bool varies;
} probe_dim;

/* The probe's device buffers, for its largest product. */
typedef struct probe_buffers {
    void *a, *b;
    float *d;
} probe_buffers;

/* One product of the probe, M x N with the block at (m_at, n_at); its block (bm, bn) comes back
 * in host (column-major, leading dimension bm). */
static em_status probe_run(em_gemm *g, em_gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
                           const probe_buffers *buf, int64_t M, int64_t N, int64_t m_at,
                           int64_t n_at, int64_t bm, int64_t bn, float *host, bool *ran) {
    const em_gemm_shape *s = &p->shape;
    fill_probe(g, buf->a, s->type, s->n_in, M, 0, m_at, 1);
    fill_probe(g, buf->b, s->type, s->n_in, N, 0, n_at, 2);
    fill_probe(g, buf->d, CUDA_R_32F, M, N, m_at, n_at, 3); /* the accumulated-onto values */
    *ran = algo_check(g, p, algo, M, N, NULL) == CUBLAS_STATUS_SUCCESS &&
           matmul(g, p, algo, M, N, buf->a, buf->b, buf->d) == CUBLAS_STATUS_SUCCESS;
    cudaError_t e = cudaStreamSynchronize(g->stream);
    if (e == cudaSuccess && *ran)
        e = cudaMemcpy2D(host, (size_t)bm * sizeof(float), buf->d + m_at + n_at * M,
                         (size_t)M * sizeof(float), (size_t)bm * sizeof(float), (size_t)bn,
                         cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? NULL : cuda_failure(e, "GEMM row-invariance probe");
}

/* Whether the algorithm keeps the probe block bit-identical alone, as single rows, at an offset
 * inside a larger product and in a repeat of that; why says which not. A device failure is an
 * error. */
static em_status probe(em_gemm *g, em_gemm_plan *p, const cublasLtMatmulAlgo_t *algo,
                       const probe_buffers *buf, const probe_dim *m, const probe_dim *n,
                       bool *invariant, char *why, size_t why_size) {
    size_t count = (size_t)(m->block * n->block);
    float *alone = (float *)em_xmalloc(count * sizeof(float));
    float *other = (float *)em_xmalloc(count * sizeof(float));
    float *again = (float *)em_xmalloc(count * sizeof(float));
    bool ran = false;
    *invariant = false;
    /* the block alone */
    em_status err =
        probe_run(g, p, algo, buf, m->block, n->block, 0, 0, m->block, n->block, alone, &ran);
    if (!err && !ran) snprintf(why, why_size, "it does not run the probe block alone");
    /* the block's first position (and vocabulary row) alone: its varying sizes 1 */
    int64_t m1 = m->varies ? 1 : m->block, n1 = n->varies ? 1 : n->block;
    bool same = true;
    if (!err && ran) {
        err = probe_run(g, p, algo, buf, m1, n1, 0, 0, m1, n1, other, &ran);
        for (int64_t j = 0; !err && ran && j < n1; j++)
            same = same && memcmp(other + j * m1, alone + j * m->block, (size_t)m1 * 4) == 0;
        if (!err && (!ran || !same))
            snprintf(why, why_size, "a single position alone %s", ran ? "differs" : "does not run");
    }
    /* the block inside the larger product, twice */
    if (!err && ran && same) {
        err = probe_run(g, p, algo, buf, m->total, n->total, m->at, n->at, m->block, n->block,
                        other, &ran);
        if (!err && ran)
            err = probe_run(g, p, algo, buf, m->total, n->total, m->at, n->at, m->block, n->block,
                            again, &ran);
        if (!err && !ran)
            snprintf(why, why_size, "it does not run %lld x %lld", (long long)m->total,
                     (long long)n->total);
        else if (!err && memcmp(other, alone, count * sizeof(float)) != 0)
            snprintf(why, why_size, "the probe block differs at offset (%lld, %lld) of %lld x %lld",
                     (long long)m->at, (long long)n->at, (long long)m->total, (long long)n->total);
        else if (!err && memcmp(other, again, count * sizeof(float)) != 0)
            snprintf(why, why_size, "a repeated product differs");
        else if (!err)
            *invariant = true;
    }
    free(alone);
    free(other);
    free(again);
    return err;
}

/* The probe's dimensions for a plan: positions vary; the head's vocabulary rows vary too. */
static void probe_dims(const em_gemm_shape *s, probe_dim *m, probe_dim *n) {
    probe_dim positions = {PROBE_ROWS, PROBE_AT, PROBE_T, true};
    if (s->kind == EM_GEMM_HEAD) {
        *m = positions;
        *n = probe_dim{PROBE_VOCAB, PROBE_VOCAB_AT, PROBE_VOCAB_TOTAL, true};
    } else {
        *m = probe_dim{s->n_out, 0, s->n_out, false};
        *n = positions;
    }
}

static em_status probe_alloc(const em_gemm_shape *s, const probe_dim *m, const probe_dim *n,
                             probe_buffers *buf) {
    size_t bytes = (size_t)type_row(s->type)->bytes;
    buf->a = buf->b = buf->d = NULL;
    cudaError_t e = cudaMalloc(&buf->a, (size_t)(s->n_in * m->total) * bytes);
    if (e == cudaSuccess) e = cudaMalloc(&buf->b, (size_t)(s->n_in * n->total) * bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&buf->d, (size_t)(m->total * n->total) * sizeof(float));
    return e == cudaSuccess ? NULL : cuda_failure(e, "buffers of the GEMM row-invariance probe");
}

static void probe_free(probe_buffers *buf) {
    cudaFree(buf->a);
    cudaFree(buf->b);
    cudaFree(buf->d);
}

/* The preference the candidates are asked for with: the workspace, no split-K reduction, FP32
 * or wider accumulation without TF32 or Gaussian products, pointers ALIGNMENT-byte aligned. */
static cublasStatus_t preference(cublasLtMatmulPreferenceOpaque_t *pref) {
    uint64_t workspace = WORKSPACE_BYTES;
    uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_NONE, alignment = ALIGNMENT;
    uint64_t impl = ~(uint64_t)(CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_16F |
                                CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32 |
                                CUBLASLT_NUMERICAL_IMPL_FLAGS_GAUSSIAN);
    cublasStatus_t st = cublasLtMatmulPreferenceInit(pref);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace, sizeof workspace);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &reductions, sizeof reductions);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, &impl,
                                                  sizeof impl);
    const cublasLtMatmulPreferenceAttributes_t aligned[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < sizeof aligned / sizeof *aligned && st == CUBLAS_STATUS_SUCCESS; i++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, aligned[i], &alignment, sizeof alignment);
    return st;
}

/* Split-K off in the algorithm's configuration: one K split, no reduction scheme. */
static cublasStatus_t no_split_k(cublasLtMatmulAlgo_t *algo) {
    int32_t splits = 1;
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasStatus_t st = cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                             &splits, sizeof splits);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                  &scheme, sizeof scheme);
    return st;
}

static em_status check_shape(const em_gemm_shape *s) {
    char text[96];
    shape_text(s, text, sizeof text);
    if (!type_row(s->type))
        return em_error_new(EM_EXIT_RUNTIME, "cuBLASLt: the %s has an unsupported type (%d)", text,
                            (int)s->type);
    bool head = s->kind == EM_GEMM_HEAD;
    if (s->n_in < 1 || s->n_in > INT32_MAX ||
        (head ? s->n_out != 0 || s->accumulate : s->n_out < 1 || s->n_out > INT32_MAX))
        return em_error_new(EM_EXIT_RUNTIME, "cuBLASLt: no plan for a %s", text);
    return NULL;
}

/* The descriptor: FP32 compute and scale, A transposed (in cuBLASLt's column-major terms). */
static cublasStatus_t describe_op(em_gemm_plan *p) {
    int32_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    cublasStatus_t st = cublasLtMatmulDescInit(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                            sizeof transa);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulDescSetAttribute(&p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                            sizeof transb);
    return st;
}

/* Chooses the plan's algorithm among the heuristic's candidates (see gemm.cuh). */
static em_status choose_algo(em_gemm *g, em_gemm_plan *p) {
    const em_gemm_shape *s = &p->shape;
    bool head = s->kind == EM_GEMM_HEAD;
    int64_t M = head ? REPRESENTATIVE_HEAD_N : s->n_out;
    int64_t N = head ? REPRESENTATIVE_HEAD_ROWS : REPRESENTATIVE_T;
    cublasLtMatmulPreferenceOpaque_t pref;
    gemm_layouts l;
    cublasLtMatmulHeuristicResult_t found[CANDIDATES];
    int count = 0;
    cublasStatus_t st = preference(&pref);
    if (st == CUBLAS_STATUS_SUCCESS) st = make_layouts(s, M, N, &l);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(g->lt, &p->desc, &l.a, &l.b, &l.d, &l.d, &pref,
                                            CANDIDATES, found, &count);
    if (st != CUBLAS_STATUS_SUCCESS) return lt_error(st, s, "the algorithm heuristic");
    if (count == 0) return lt_error(CUBLAS_STATUS_NOT_SUPPORTED, s, "an algorithm without split-K");
    probe_dim pm, pn;
    probe_dims(s, &pm, &pn);
    probe_buffers buf;
    em_status err = probe_alloc(s, &pm, &pn, &buf);
    int valid = 0;
    char why[sizeof p->why] = "", first_why[sizeof p->why] = "";
    cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < count && !err && !p->row_invariant; i++) {
        cublasLtMatmulAlgo_t algo = found[i].algo;
        size_t workspace = 0;
        if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
        if ((last = no_split_k(&algo)) != CUBLAS_STATUS_SUCCESS ||
            (last = algo_check(g, p, &algo, M, N, &workspace)) != CUBLAS_STATUS_SUCCESS)
            continue;
        bool invariant = false;
        err = probe(g, p, &algo, &buf, &pm, &pn, &invariant, why, sizeof why);
        if (err) break;
        if (valid++ == 0 || invariant) { /* the first valid one, unless a later one is invariant */
            p->algo = algo;
            p->workspace = workspace;
            p->row_invariant = invariant;
            if (!invariant) snprintf(first_why, sizeof first_why, "%s", why);
        }
    }
    probe_free(&buf);
    if (err) return err;
    if (valid == 0)
        return lt_error(last, s,
                        "every candidate algorithm with split-K off (cublasLtMatmulAlgoCheck)");
    if (!p->row_invariant)
        snprintf(p->why, sizeof p->why,
                 "none of %d candidate algorithms keeps rows bit-identical "
                 "(the one used: %s)",
                 valid, first_why);
    return NULL;
}

static void free_plan(em_gemm_plan *p) {
    if (!p) return;
    free(p->checked);
    free(p);
}

static bool same_shape(const em_gemm_shape *a, const em_gemm_shape *b) {
    return a->kind == b->kind && a->type == b->type && a->n_out == b->n_out && a->n_in == b->n_in &&
           a->accumulate == b->accumulate;
}

static em_status find_plan(em_gemm *g, const em_gemm_shape *s, em_gemm_plan **out) {
    for (int i = 0; i < g->n_plans; i++)
        if (same_shape(&g->plans[i]->shape, s)) {
            *out = g->plans[i];
            return NULL;
        }
    *out = NULL;
    em_status err = check_shape(s);
    if (err) return err;
    em_gemm_plan *p = (em_gemm_plan *)em_xcalloc(1, sizeof *p);
    p->shape = *s;
    cublasStatus_t st = describe_op(p);
    err = st == CUBLAS_STATUS_SUCCESS ? choose_algo(g, p) : lt_error(st, s, "the descriptor");
    if (err) {
        free_plan(p);
        return err;
    }
    g->plans = (em_gemm_plan **)em_xrealloc(g->plans, (size_t)(g->n_plans + 1) * sizeof *g->plans);
    g->plans[g->n_plans++] = p;
    *out = p;
    return NULL;
}

em_status em_gemm_plan_for(em_gemm *g, const em_gemm_shape *shape, const em_gemm_plan **out) {
    em_gemm_plan *p = NULL;
    em_status err = find_plan(g, shape, &p);
    *out = p;
    return err;
}

void em_gemm_plan_describe(const em_gemm_plan *p, char *buf, size_t size) {
    int32_t id = -1, splits = -1;
    uint32_t tile = 0, stages = 0, scheme = 0, swizzle = 0, custom = 0;
    uint16_t cluster = 0, inner = 0;
    size_t got = 0;
    const cublasLtMatmulAlgo_t *a = &p->algo;
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages,
                                         &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits,
                                         &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                         sizeof scheme, &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                         sizeof swizzle, &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                         sizeof custom, &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                         sizeof cluster, &got);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner,
                                         sizeof inner, &got);
    char text[96];
    shape_text(&p->shape, text, sizeof text);
    snprintf(
        buf, size,
        "%s: algo %d tile %u stages %u splitK %d reduction %u swizzle %u custom %u "
        "cluster %u inner %u, workspace %zu B, %s%s",
        text, (int)id, tile, stages, (int)splits, scheme, swizzle, custom, (unsigned)cluster,
        (unsigned)inner, p->workspace,
        p->row_invariant ? "row-invariant" : "NOT row-invariant: ", p->row_invariant ? "" : p->why);
}

/* The product's pointers aligned and its size M x N checked once against the plan's algorithm. */
static em_status ready(em_gemm *g, em_gemm_plan *p, int64_t M, int64_t N, const void *a,
                       const void *b, const float *d) {
    char text[96];
    shape_text(&p->shape, text, sizeof text);
    const void *ptrs[] = {a, b, d};
    const char *names[] = {"A", "B", "D"};
    for (int i = 0; i < 3; i++)
        if ((uintptr_t)ptrs[i] % ALIGNMENT)
            return em_error_new(EM_EXIT_RUNTIME,
                                "cuBLASLt: the %s's %s at %p is not %d-byte aligned", text,
                                names[i], ptrs[i], ALIGNMENT);
    if (M < 1 || N < 1 || M > INT32_MAX || N > INT32_MAX)
        return em_error_new(EM_EXIT_RUNTIME, "cuBLASLt: the %s has no product of %lld x %lld", text,
                            (long long)M, (long long)N);
    uint64_t key = (uint64_t)M << 32 | (uint64_t)N;
    size_t lo = 0, hi = p->n_checked;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->checked[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->n_checked && p->checked[lo] == key) return NULL;
    cublasStatus_t st = algo_check(g, p, &p->algo, M, N, NULL);
    if (st != CUBLAS_STATUS_SUCCESS) {
        char algo[512];
        em_gemm_plan_describe(p, algo, sizeof algo);
        if (p->shape.kind == EM_GEMM_HEAD)
            return em_error_new(EM_EXIT_RUNTIME,
                                "cuBLASLt: the fixed algorithm of the %s does not take n = %lld "
                                "positions x %lld vocabulary rows (cublasLtMatmulAlgoCheck: %s); "
                                "not switching algorithm, as that would change the results (%s)",
                                text, (long long)M, (long long)N, cublasLtGetStatusString(st),
                                algo);
        return em_error_new(EM_EXIT_RUNTIME,
                            "cuBLASLt: the fixed algorithm of the %s does not take T = %lld "
                            "(cublasLtMatmulAlgoCheck: %s); not switching algorithm, as that would "
                            "change the results (%s)",
                            text, (long long)N, cublasLtGetStatusString(st), algo);
    }
    if (p->n_checked == p->cap_checked) {
        p->cap_checked = p->cap_checked ? 2 * p->cap_checked : 16;
        p->checked = (uint64_t *)em_xrealloc(p->checked, p->cap_checked * sizeof *p->checked);
    }
    memmove(p->checked + lo + 1, p->checked + lo, (p->n_checked - lo) * sizeof *p->checked);
    p->checked[lo] = key;
    p->n_checked++;
    return NULL;
}

static em_status run(em_gemm *g, em_gemm_plan *p, int64_t M, int64_t N, const void *a,
                     const void *b, float *d) {
    em_status err = ready(g, p, M, N, a, b, d);
    if (err) return err;
    cublasStatus_t st = matmul(g, p, &p->algo, M, N, a, b, d);
    return st == CUBLAS_STATUS_SUCCESS ? NULL : lt_error(st, &p->shape, "cublasLtMatmul");
}

em_status em_gemm_project(em_gemm *g, const em_dmat *w, const void *in, int T, float *out,
                          bool accumulate) {
    em_gemm_shape s = {EM_GEMM_PROJECTION, w->type, w->rows, w->cols, accumulate};
    em_gemm_plan *p = NULL;
    em_status err = find_plan(g, &s, &p);
    return err ? err : run(g, p, w->rows, T, w->data, in, out);
}

em_status em_gemm_head(em_gemm *g, const em_dmat *w, int64_t row0, int rows, const void *in, int n,
                       float *lt) {
    em_gemm_shape s = {EM_GEMM_HEAD, w->type, 0, w->cols, false};
    if (row0 < 0 || rows < 1 || row0 + rows > w->rows)
        return em_error_new(EM_EXIT_RUNTIME,
                            "cuBLASLt: head rows %lld .. %lld are outside the %lld of the output",
                            (long long)row0, (long long)row0 + rows, (long long)w->rows);
    em_gemm_plan *p = NULL;
    em_status err = find_plan(g, &s, &p);
    if (err) return err;
    const gemm_type *t = type_row(w->type);
    const char *rows_at = (const char *)w->data + (size_t)row0 * (size_t)w->cols * (size_t)t->bytes;
    return run(g, p, n, rows, in, rows_at, lt);
}

bool em_gemm_row_invariant(const em_gemm *g, char *reason, size_t size) {
    for (int i = 0; i < g->n_plans; i++)
        if (!g->plans[i]->row_invariant) {
            if (reason) {
                char text[96];
                shape_text(&g->plans[i]->shape, text, sizeof text);
                snprintf(reason, size, "the %s: %s", text, g->plans[i]->why);
            }
            return false;
        }
    return true;
}

em_status em_gemm_new(cudaStream_t stream, em_gemm **out) {
    *out = NULL;
    em_gemm *g = (em_gemm *)em_xcalloc(1, sizeof *g);
    g->stream = stream;
    cublasStatus_t st = cublasLtCreate(&g->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        g->lt = NULL;
        em_gemm_free(g);
        return em_error_new(EM_EXIT_RUNTIME, "cuBLASLt: cublasLtCreate: %s",
                            cublasLtGetStatusString(st));
    }
    cudaError_t e = cudaMalloc(&g->workspace, WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        g->workspace = NULL;
        em_gemm_free(g);
        return cuda_failure(e, "the cuBLASLt workspace");
    }
    *out = g;
    return NULL;
}

void em_gemm_free(em_gemm *g) {
    if (!g) return;
    for (int i = 0; i < g->n_plans; i++) free_plan(g->plans[i]);
    free(g->plans);
    cudaFree(g->workspace);
    if (g->lt) cublasLtDestroy(g->lt);
    free(g);
}
