/* y = x W^T for activations x (T, n_in) and a weight W of n_out rows of n_in values stored in
 * any supported type, used straight from the mapped file.
 *
 * x is packed once (gemm.h) into the shared scratch. W is cut into tiles of EM_MATMUL_TILE_ROWS
 * rows; OpenMP spreads the tiles over threads, and each thread converts its tile to floats in its
 * own scratch and multiplies it by em_gemm_tile. Every element of y is one fma chain over n_in in
 * order (gemm_microkernel.h), so results are bit-identical for any thread count, tile size,
 * window batch or CPU. */
#ifndef EVALMESH_KERNELS_MATMUL_H
#define EVALMESH_KERNELS_MATMUL_H

#include <stdbool.h>

#include "stages/kernels/cpu/scratch.h"
#include "stages/model/model.h"

#define EM_MATMUL_TILE_ROWS 48 /* a multiple of EM_GEMM_ROWS */

/* Per-thread scratch floats for a tile of `rows` weight rows of n_in columns and T positions:
 * the tile's result ct and the tile as floats (see em_matmul_tile_rows). em_matmul needs
 * em_matmul_tile_floats(T, n_in, EM_MATMUL_TILE_ROWS). */
size_t em_matmul_tile_floats(int T, int64_t n_in, int rows);

/* x is (T, n_in), y is (T, n_out) with n_in = w->shape[0], n_out = w->shape[1]:
 * y = x W^T, or y += x W^T when accumulate (the residual stream takes projections this way). */
void em_matmul(const float *x, int T, const em_tensor *w, float *y, bool accumulate, em_scratch *s);

/* y[i] = x W[i]^T for count weights sharing x (Q, K and V; gate and up): x is packed once, and
 * the tiles of all of them are spread over the threads together, so fewer, fuller rounds. */
void em_matmul_many(const float *x, int T, int count, const em_tensor *const *w, float *const *y,
                    em_scratch *s);

/* Packs x (T, n_in) into s->packed for em_matmul_tile_rows (all threads). */
void em_matmul_pack(const float *x, int T, int n_in, em_scratch *s);

/* ct (em_gemm_padded_rows(rows), em_gemm_padded_tokens(T)) = W[row0 .. row0+rows-1] x^T, with x
 * packed by em_matmul_pack; buf is the calling thread's scratch of em_matmul_tile_floats (ct is
 * its start). The output head walks the vocabulary with this, tile by tile. */
float *em_matmul_tile_rows(const em_tensor *w, int T, int64_t row0, int rows, const em_scratch *s,
                           float *buf);

#endif
