/* A kernel's GEMM peak on this machine, the yardstick of the forward's GFLOP/s: the forward's own
 * matrix product (em_matmul_packed, matmul.h) on a square product, y (n, n) = x (n, n) W^T with W
 * n rows of n values, through one kernel: the exact precision's GEMM microkernel with F32 weights
 * (the conversion of a tile is a copy), the ggml precision's dot products on weights of one of
 * its types (the activations rounded to 8 bits once per product, as in the forward), or the bf16
 * precision's kernel with F32 weights (each tile rounded to BF16 as in the forward). The best of
 * a few timed products after a warm-up one: the most this kernel gives here. */
#ifndef EVALMESH_BENCH_GEMM_PEAK_H
#define EVALMESH_BENCH_GEMM_PEAK_H

#include <stdbool.h>

#include "util/error.h"
#include "stages/formats/ggml_types.h"
#include "stages/kernels/forward_backend.h"

#define GEMM_PEAK_N 2048 /* the square product's size */

/* GFLOP/s (2 per multiply-add) of kernel (an EVALMESH_CPU_KERNEL name: avx512, amx, avx512vnni,
 * avxvnni, avx2, avx512bf16 or c; NULL: this CPU's best) of the precision on weights of `type` (F32
 * in the exact and bf16 precisions; a type of ggml_dot.h's table in ggml) with `threads` OpenMP
 * threads. An error (exit status 2) when this CPU lacks the kernel or the ggml precision has no dot
 * product for the type.
 */
em_status gemm_peak_gflops(const char *kernel, em_precision precision, em_tensor_type type, int n,
                           int threads, double *gflops, const char **kernel_used);

#endif
