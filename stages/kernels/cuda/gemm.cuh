/* The forward's matrix products through cuBLASLt, with FP32 accumulation and one fixed algorithm
 * per product shape, so that a row's result does not depend on how many rows the product has or
 * where the row sits among them (what batching many windows per launch needs).
 *
 * A context (em_gemm) holds a cuBLASLt handle, one fixed workspace, the stream the forward's
 * kernels run on and one plan per product shape, made on the shape's first use: the matmul
 * descriptor (CUBLAS_COMPUTE_32F with an FP32 scale: BF16/F16 inputs with FP32 results, FP32
 * inputs in FP32 without TF32, the exact mode) and ONE algorithm used for every T. The algorithm
 * is the first of cublasLtMatmulAlgoGetHeuristic's candidates for a representative T, asked for
 * without split-K (the preference's reduction-scheme mask allows only NONE) and with split-K
 * forced off in its configuration (SPLITK_NUM 1, REDUCTION_SCHEME NONE), that passes
 * cublasLtMatmulAlgoCheck and the row-invariance probe: a block of probe rows computed alone
 * (T = the block, and T = 1) and at an odd offset inside a larger T, bit for bit, twice. When no
 * candidate passes the probe the first valid one is used and the plan says it is not row-invariant
 * (em_gemm_row_invariant), so batching can fall back to one window per launch. A T (or, for the
 * head, a count of vocabulary rows) the plan's algorithm does not support is an error naming the
 * shape and the T: the algorithm never changes with T. Every pointer must be 16-byte aligned (the
 * alignment the candidates are asked for). */
#ifndef EVALMESH_KERNELS_CUDA_GEMM_CUH
#define EVALMESH_KERNELS_CUDA_GEMM_CUH

#include <cuda_runtime.h>
#include <library_types.h>
#include <stddef.h>

#include "stages/kernels/cuda/kernels.cuh"
extern "C" {
#include "util/error.h"
}

/* The two products of the forward. */
typedef enum em_gemm_kind {
    /* out (T, w.rows) = in (T, w.cols) w^T, or += with accumulate: the projections */
    EM_GEMM_PROJECTION,
    /* lt (rows, n) = w[row0 .. row0+rows) in (n, w.cols)^T: the head's logits, transposed; both
     * the positions n and the vocabulary rows come with each call */
    EM_GEMM_HEAD,
} em_gemm_kind;

/* What a plan is made for. */
typedef struct em_gemm_shape {
    em_gemm_kind kind;
    cudaDataType_t type; /* of the weights and the input: CUDA_R_16BF, CUDA_R_16F or CUDA_R_32F */
    int64_t n_out;       /* weight rows of a projection; 0 for the head */
    int64_t n_in;        /* weight columns: the length of an input row */
    bool accumulate;     /* projections only: out += rather than out = */
} em_gemm_shape;

typedef struct em_gemm em_gemm;
typedef struct em_gemm_plan em_gemm_plan;

/* A context on the current device whose products run on `stream`. */
em_status em_gemm_new(cudaStream_t stream, em_gemm **out);
void em_gemm_free(em_gemm *g);

/* The plan of a shape: found, or made now (heuristic, probe; synchronizes the device). */
em_status em_gemm_plan_for(em_gemm *g, const em_gemm_shape *shape, const em_gemm_plan **out);

/* "algo 66 tile 20 stages 19 splitK 1 reduction 0 swizzle 0 custom 0 cluster 2 inner 0,
 * workspace 0 B, row-invariant" (or why it is not): the plan's algorithm for a log or a report. */
void em_gemm_plan_describe(const em_gemm_plan *p, char *buf, size_t size);

/* out (T, w->rows) = in (T, w->cols) w^T (+ out when accumulate), in of w's type; FP32 out. */
em_status em_gemm_project(em_gemm *g, const em_dmat *w, const void *in, int T, float *out,
                          bool accumulate);

/* lt (rows, n) = rows row0 .. row0+rows of w times in (n, w->cols)^T, in of w's type: the
 * logits of those vocabulary rows for n positions, transposed (row r at lt + r n). */
em_status em_gemm_head(em_gemm *g, const em_dmat *w, int64_t row0, int rows, const void *in, int n,
                       float *lt);

/* Whether every plan made so far keeps a row's result bit-identical whatever the rows beside it;
 * when not, reason (if given) names the first plan that does not and why. */
bool em_gemm_row_invariant(const em_gemm *g, char *reason, size_t size);

#endif
