/* The innermost product of the CPU GEMM (gemm.h): EM_GEMM_ROWS weight rows times EM_GEMM_TOKENS
 * tokens over a block of kc input columns, written for three instruction sets (AVX-512F,
 * AVX2+FMA, plain C).
 *
 * Every kernel computes each output element as one chain of fused multiply-adds in k order,
 *     c = fma(x[t][k], w[j][k], c)  for k = 0, 1, ..., kc-1,
 * starting from 0 (first block) or from the value left in ct by the previous block. A fused
 * multiply-add is rounded once by IEEE rules whatever executes it, and storing a float between
 * blocks is exact, so the result is the same chain over the whole row however the caller blocks
 * k, tiles the rows, splits the work over threads, and whichever of the three kernels runs:
 * bit-identical on every x86-64 CPU (and on any CPU through the C kernel). */
#ifndef EVALMESH_KERNELS_GEMM_MICROKERNEL_H
#define EVALMESH_KERNELS_GEMM_MICROKERNEL_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define EM_GEMM_ROWS 12   /* weight rows per kernel call */
#define EM_GEMM_PANEL 16  /* tokens per packed activation panel */
#define EM_GEMM_TOKENS 32 /* tokens per kernel call: two panels */

/* xp is `panels` (1 or 2) panels of EM_GEMM_PANEL tokens, at xp and xp + panel_stride: token i
 * of a panel at column k is xp[k * column_stride + i] (column_stride is EM_GEMM_PANEL for packed
 * activations, see gemm.h). w[j] points at kc floats of weight row j.
 * ct is (EM_GEMM_ROWS, EM_GEMM_TOKENS) with row stride ldc: ct[j * ldc + t] = (first ? 0 :
 * ct[j * ldc + t]) + sum over k of x[t][k] w[j][k], as the fma chain above, for the tokens t of
 * the panels (one panel: a call whose tokens are all in the first, as a decoding step of 5 to 16
 * sequences, computes no padding and leaves ct's other 16 columns as they are). */
typedef void em_gemm_microkernel(int kc, const float *xp, size_t column_stride, size_t panel_stride,
                                 int panels, const float *const *w, float *ct, size_t ldc,
                                 bool first);

/* The same products for a few tokens (T <= EM_GEMM_FEW_TOKENS: every decoding step of up to that
 * many sequences, and a decoding query's group of heads against their keys), where the
 * microkernel would spend most of its 32 token lanes on padding: token t at column k is
 * x[k * column_stride + t] (the first tokens of a packed panel: column_stride EM_GEMM_PANEL), w as
 * em_gemm_tile's wt (rows rows of K floats, row stride ldw); ct[j * ldc + t] = the fma chain above
 * over the whole row from 0, for t < T and j < rows (em_gemm_tile's other entries are to be
 * ignored). The rows go across the vector lanes (through transposed blocks of rows, each block
 * shared by the tokens), so each output is still one chain in k order: the same bits as the
 * microkernel. */
#define EM_GEMM_FEW_TOKENS 4
typedef void em_gemm_few_tokens(int K, const float *x, size_t column_stride, int T, const float *w,
                                size_t ldw, int rows, float *ct, size_t ldc);
/* The few-token kernel of the microkernel's instruction set. */
em_gemm_few_tokens *em_gemm_few_tokens_for(em_gemm_microkernel *kernel);

/* The same product with the weight given transposed, wt (K, rows) with row stride ldw (attention's
 * values: V's rows are the keys k, its columns the outputs j; the tokens a query's group of heads):
 * c[j * ldc + t] = the fma chain over k of x[k * column_stride + t] wt[k][j] from 0, for j < rows
 * and t < T <= EM_GEMM_FEW_TOKENS. The rows are the lanes as they come, with no transposing: the
 * bits em_gemm_few_tokens gives for the weight's transpose. */
typedef void em_gemm_few_tokens_transposed(int K, const float *x, size_t column_stride, int T,
                                           const float *wt, size_t ldw, int rows, float *c,
                                           size_t ldc);
em_gemm_few_tokens_transposed *em_gemm_few_tokens_transposed_for(em_gemm_microkernel *kernel);

/* The AVX-512 microkernel, or NULL on a CPU without AVX-512F (the bf16 precision's avx512 row runs
 * its chains on it: bf16_dot.h). */
em_gemm_microkernel *em_gemm_microkernel_avx512(void);

/* Every name the environment variable EVALMESH_CPU_KERNEL takes: the microkernels here, the
 * rows of the ggml dot products' table (ggml_dot.h) and of the bf16 precision's (bf16_dot.h); a
 * table given a name it has no row for takes its own best for this CPU. */
#define EM_CPU_KERNEL_NAMES "amx, avx512vnni, avxvnni, avx512bf16, avx512, avx2 or c"

/* The kernel for this CPU (AVX-512F, else AVX2 with FMA, else plain C) or the one the environment
 * variable EVALMESH_CPU_KERNEL names (avx512, avx2 or c; amx, avx512vnni, avxvnni and avx512bf16,
 * rows of the other precisions' tables, give the best): tests compare them. name: the
 * microkernel's. An error (exit 2) when that variable names an unknown kernel or one this CPU
 * cannot run. */
em_status em_gemm_microkernel_select(em_gemm_microkernel **kernel, const char **name);

#endif
