/* y = x W^T for activations x (T, n_in) and a weight W of n_out rows of n_in values stored in
 * any supported type, used straight from the mapped file.
 *
 * W is cut into tiles of EM_MATMUL_TILE_ROWS rows (a constant, so tile boundaries never depend on
 * the thread count). Each tile is converted to floats in the calling thread's scratch (F32 tiles
 * are used in place) and multiplied by one single-threaded cblas_sgemm of shape
 * (M=T, N=tile rows, K=n_in); OpenMP spreads the tiles over threads. Every element of y is thus
 * computed by exactly one sgemm call whose shape depends only on T and W: results are
 * bit-identical for any thread count. */
#ifndef EVALMESH_KERNELS_MATMUL_H
#define EVALMESH_KERNELS_MATMUL_H

#include <stdbool.h>

#include "stages/kernels/cpu/scratch.h"
#include "stages/model/model.h"

#define EM_MATMUL_TILE_ROWS 128

/* Scratch floats per thread that em_matmul needs for a weight with n_in columns. */
size_t em_matmul_scratch_floats(int64_t n_in);

/* x is (T, n_in), y is (T, n_out) with n_in = w->shape[0], n_out = w->shape[1]:
 * y = x W^T, or y += x W^T when accumulate (the residual stream takes projections this way). */
void em_matmul(const float *x, int T, const em_tensor *w, float *y, bool accumulate, em_scratch *s);

/* y[i] = x W[i]^T for count weights sharing x (Q, K and V; gate and up): the tiles of all of
 * them are spread over the threads together, so fewer, fuller parallel rounds. */
void em_matmul_many(const float *x, int T, int count, const em_tensor *const *w, float *const *y,
                    em_scratch *s);

/* Rows row0 .. row0+rows-1 of W only: y is (T, rows) with row stride ldy; beta 0 overwrites y,
 * 1 adds to it. Used by the output head, which walks the vocabulary tile by tile. tile is the
 * caller's scratch. */
void em_matmul_rows(const float *x, int T, const em_tensor *w, int64_t row0, int64_t rows, float *y,
                    int ldy, float beta, float *tile);

#endif
