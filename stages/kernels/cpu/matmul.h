/* y = x W^T for activations x (T, n_in) and a weight W of n_out rows of n_in values stored in
 * any supported type, used straight from the mapped file.
 *
 * x is packed (gemm.h) once per product, or arrives packed from the kernel that made it
 * (attention's output, the SwiGLU of the MLP). W is cut into tiles of at most EM_MATMUL_TILE_ROWS
 * rows (fewer when there are many threads); OpenMP spreads the tiles over threads
 * (em_schedule_tiles), and each thread converts its tile to floats in its own scratch and
 * multiplies it by em_gemm_tile. Every element of y is one fma chain over n_in in order
 * (gemm_microkernel.h), so results are bit-identical for any thread count, tile size, window batch
 * or CPU. In the `ggml` precision (scratch.h) the tiles of the weight types it covers are instead
 * the dot products of ggml_dot.h with x rounded to 8 bits once per product (em_matmul_quantize):
 * each element one fixed computation as well, with the same independence. In the `bf16` precision
 * every tile's weights are rounded to BF16 pairs in the thread's scratch and multiplied by the
 * activations rounded to BF16 once per product (em_matmul_quantize) in bf16_dot.h's fixed order:
 * the same independence again. */
#ifndef EVALMESH_KERNELS_MATMUL_H
#define EVALMESH_KERNELS_MATMUL_H

#include <stdbool.h>

#include "stages/kernels/cpu/scratch.h"
#include "stages/model/loaded_model.h"

#define EM_MATMUL_TILE_ROWS 48 /* the most rows per tile, a multiple of EM_GEMM_ROWS */

/* Per-thread scratch floats for a tile of `rows` weight rows of n_in columns and T positions:
 * the tile's result ct and the tile as floats (see em_matmul_tile_rows). em_matmul_packed needs
 * em_matmul_tile_floats(T, n_in, EM_MATMUL_TILE_ROWS). */
size_t em_matmul_tile_floats(int T, int64_t n_in, int rows);

/* Per-thread scratch floats em_matmul_swiglu_packed needs: a second tile result. */
size_t em_matmul_swiglu_floats(int T, int64_t n_in);

/* Packs x (T, n_in) into xp, em_gemm_packed_floats(T, n_in) floats (all threads). */
void em_matmul_pack(const float *x, int T, int n_in, float *xp, const em_scratch *s);

/* Precision bf16 (s->bf16 set): rounds x packed as xp (T, n_in) to BF16 pairs into s->bf16_x, which
 * every product (em_matmul_tile_rows) then reads instead of xp. Precision ggml (s->ggml set) and
 * any of the count weights w of a type it covers (ggml_dot.h):
 * rounds x packed as xp (T, n_in) to 8 bits (or fp16, for F16 weights) into s->q8 (in the forms
 * their dot products read),
 * which the products of those weights
 * (em_matmul_tile_rows) then read instead of xp; otherwise nothing. em_matmul_packed and
 * em_matmul_swiglu_packed call it; a caller of em_matmul_tile_rows calls it once per xp. */
void em_matmul_quantize(const float *xp, int T, int n_in, int count, const em_tensor *const *w,
                        em_scratch *s);

/* y[i] = x W[i]^T, or y[i] += x W[i]^T when accumulate (the residual stream takes projections
 * this way), for count weights sharing x, given packed as xp; n_in = w[i]->shape[0] and y[i] is
 * (T, w[i]->shape[1]). The tiles of all the weights are spread over the threads together (Q, K
 * and V in one round). */
void em_matmul_packed(const float *xp, int T, int count, const em_tensor *const *w, float *const *y,
                      bool accumulate, em_scratch *s);

/* The MLP's h = SwiGLU(x Wgate^T, x Wup^T) (T, F) (GeGLU with act EM_ACTIVATION_GELU_TANH) from x
 * packed as xp, written packed into hp
 * (em_gemm_packed_floats(T, F)) for the down projection. A tile of gate rows and the same rows
 * of up are computed together; neither (T, F) product is ever stored whole. */
void em_matmul_swiglu_packed(const float *xp, int T, const em_tensor *w_gate, const em_tensor *w_up,
                             em_activation act, float *hp, em_scratch *s);

/* ct (em_gemm_padded_rows(rows), em_gemm_result_stride(T)) = W[row0 .. row0+rows-1] x^T for x
 * packed as xp (or, for a weight the ggml precision covers, x as em_matmul_quantize left it in
 * s->q8, through s->ggml's dot products; in precision bf16, x as s->bf16_x and W rounded to
 * BF16, through s->bf16's kernel); buf is the calling thread's scratch of
 * em_matmul_tile_floats (ct is its start). The output head walks the vocabulary with this, tile by
 * tile. */
float *em_matmul_tile_rows(const em_tensor *w, const float *xp, int T, int64_t row0, int rows,
                           const em_scratch *s, float *buf);

#endif
