/* The attention kernels' throughput on one GPU, C-callable for bench_gpu (attention_bench.cu). */
#ifndef EVALMESH_KERNELS_CUDA_ATTENTION_BENCH_H
#define EVALMESH_KERNELS_CUDA_ATTENTION_BENCH_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "util/error.h"

/* TFLOP/s of the attention kernel that attention_table.cuh picks for a forward of BF16/F16
 * weights (half) or of FP32 weights (!half), on one causal window of T positions of n_heads /
 * n_kv_heads heads of head_dim: reps calls timed after one warm-up, on q, k, v uniform in (-1, 1)
 * generated on the device. FLOPs counted: 4 head_dim n_heads per (query, visible key), T (T + 1)
 * / 2 of those (em_llama_forward_flops' attention term). *kernel is the table row's name. */
em_status em_cuda_attention_tflops(bool half, int n_heads, int n_kv_heads, int head_dim, int T,
                                   int reps, double *tflops, const char **kernel);

#ifdef __cplusplus
}
#endif

#endif
