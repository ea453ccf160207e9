/* The CPU matrix product of the forward: ct = W x^T for a tile of weight rows W (rows, K) and
 * activations x (T, K), built around the microkernels of gemm_microkernel.h.
 *
 * x is packed once per product into panels of EM_GEMM_PANEL tokens, column-major within a panel
 * (em_gemm_pack_panel), and shared by every thread. A product of a few tokens (T <=
 * EM_GEMM_FEW_TOKENS: a decoding step) is packed as one narrow panel of exactly T tokens, x^T (K,
 * T): its kernels read only those tokens, so a step's activations are not padded to 16 tokens a
 * column (16 times the memory, most of it zeros written and read at every product). Each thread
 * takes a tile of weight rows as floats (converted from the file's type into its own scratch, with
 * a padded row stride so the rows do not all fall into the same cache sets) and walks it in blocks
 * of EM_GEMM_KC columns (kept in cache) x EM_GEMM_TOKENS tokens x EM_GEMM_ROWS rows. The result of
 * a tile is transposed, ct (rows, T), which is what the output head wants; em_transpose writes it
 * into a row-major y (T, n). Each element is one fma chain over k in order (gemm_microkernel.h), so
 * results do not depend on tiles, blocks, threads or instruction set. */
#ifndef EVALMESH_KERNELS_GEMM_H
#define EVALMESH_KERNELS_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/kernels/cpu/gemm_microkernel.h"

#define EM_GEMM_KC 256     /* columns per block: a block of two panels is 32 KiB */
#define EM_GEMM_ROW_PAD 16 /* floats added to the stride of weight rows in scratch */

/* T rounded up to whole kernel calls (EM_GEMM_TOKENS): the token stride of ct. */
int em_gemm_padded_tokens(int T);
/* The row stride of ct: padded tokens plus one cache line, so that its rows do not all fall into
 * the same few cache sets (a stride of 512 floats is 2 KiB). */
size_t em_gemm_result_stride(int T);
/* rows rounded up to whole kernel calls (EM_GEMM_ROWS): the rows ct must hold. */
int em_gemm_padded_rows(int rows);
/* Floats of the packed x (T, K). */
size_t em_gemm_packed_floats(int T, int K);
/* Tokens per panel of the packed x (T, K): EM_GEMM_PANEL, or T itself when T <=
 * EM_GEMM_FEW_TOKENS (one narrow panel, no padding). */
int em_gemm_panel_width(int T);
/* Panels of the packed x (T, K): whole panels of em_gemm_padded_tokens(T), or the narrow one. */
int em_gemm_panel_count(int T);
/* Tokens of x in panel p of em_gemm_panel_width(T) tokens: 0 in a panel of padding only. */
int em_gemm_panel_tokens(int T, int panel);

/* Packs panel p of x (T, K) with row stride ldx, tokens p*W .. p*W+W-1 (W =
 * em_gemm_panel_width(T); zeros past T), into xp: token i at column k goes to xp[(p * K + k) * W +
 * i]. Panels are independent: threads share them. */
void em_gemm_pack_panel(const float *x, size_t ldx, int T, int K, int panel, float *xp);

/* Where the values of x (T, K) are: token t at column k is
 * x[(t / EM_GEMM_PANEL) * panel_stride + k * column_stride + t % EM_GEMM_PANEL], for t up to
 * em_gemm_padded_tokens(T), or only up to T in a narrow panel (column_stride T < EM_GEMM_PANEL).
 * Packed activations are em_gemm_packed(xp, T, K); attention's probabilities, stored transposed
 * (keys, queries), are read in place as panels of queries. */
typedef struct em_gemm_panels {
    const float *x;
    size_t column_stride, panel_stride;
} em_gemm_panels;

/* x (T, K) packed by em_gemm_pack_panel. */
em_gemm_panels em_gemm_packed(const float *xp, int T, int K);
/* The index in the packed x (T, K) of token t at column k. */
size_t em_gemm_packed_index(int T, int K, int t, int k);

/* ct (em_gemm_padded_rows(rows), em_gemm_padded_tokens(T)) with row stride ldc (usually
 * em_gemm_result_stride(T)) = wt x^T, where wt is rows rows of K floats with row stride ldw. Rows
 * past `rows` and tokens past T are to be ignored. */
void em_gemm_tile(em_gemm_microkernel *kernel, em_gemm_panels x, int T, int K, const float *wt,
                  size_t ldw, int rows, float *ct, size_t ldc);

/* dst[c * ldd + r] = src[r * lds + c] (or += when accumulate) for r < rows, c < cols. With src a
 * tile's ct (lds = em_gemm_result_stride(T), cols = T) this writes the tile's rows into y (T, n).
 */
void em_transpose(const float *src, size_t lds, int rows, int cols, float *dst, size_t ldd,
                  bool accumulate);

#endif
