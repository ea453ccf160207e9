/* The output head without (T, vocab) logits: for each position, -log softmax(logits)[target]
 * and the argmax, computed vocabulary tile by vocabulary tile.
 *
 * The vocabulary is cut into tiles of EM_HEAD_TILE_ROWS rows of the output weight (a constant).
 * For each tile v, em_matmul_tile_rows gives the logits transposed, (tile rows, T), in the
 * thread's scratch; from them come, per position t (vectorized across positions), the tile's max
 * m_v[t], its sum of exp(logit - m_v[t]) (float exponentials, fast_exp.h, summed in double in
 * row order), its first argmax and, in the tile holding the target, the target's logit. These
 * partials take T x tiles x 16 bytes (1/48 of the float logits for 192-row tiles) and are merged
 * per position in tile order: M = max m_v, S = sum_v s_v exp(m_v - M), nll = M + log S -
 * logit[target]. Memory per thread: about EM_HEAD_TILE_ROWS x (D + T) floats. */
#ifndef EVALMESH_KERNELS_OUTPUT_HEAD_H
#define EVALMESH_KERNELS_OUTPUT_HEAD_H

#include <stdint.h>

#include "util/error.h"
#include "stages/kernels/cpu/scratch.h"
#include "stages/kernels/vocab_head.h"
#include "stages/model/loaded_model.h"

/* Scratch floats per thread that em_output_head needs (it packs x into the shared scratch of
 * em_gemm_packed_floats(T, D) too). */
size_t em_output_head_scratch_floats(int T, int D);

/* Bytes em_output_head allocates for its per-tile partials while it runs. */
size_t em_output_head_partial_bytes(int T, int64_t n_vocab);

/* The tiles (vocab_head.h) of the output weight's rows [row0, row0 + rows) (row0 a multiple of
 * EM_HEAD_TILE_ROWS): x is (T, D) (after the final norm), w the output weight {D, n_vocab},
 * softcap > 0 caps the logits to softcap * tanh(logit / softcap) (Gemma 2) before anything else,
 * target (T) ids; part is (tiles of the rows, T); target_logit[t] is set where target[t] lies
 * in the rows. target NULL: each tile's max and argmax alone (sum_exp 0, no exp). Only those rows
 * of w are read. */
void em_output_head_tiles(const float *x, int T, const em_tensor *w, int64_t row0, int64_t rows,
                          float softcap, const int32_t *target, em_head_tile *part,
                          float *target_logit, em_scratch *s);

/* The logits themselves (T, rows) of the output weight's rows [row0, row0 + rows) (row0 a multiple
 * of EM_HEAD_TILE_ROWS), soft-capped as em_output_head_tiles does: the numbers its tiles reduce,
 * bit for bit. */
void em_output_head_logits(const float *x, int T, const em_tensor *w, int64_t row0, int64_t rows,
                           float softcap, float *logits, em_scratch *s);

/* One tile's partials for positions 0..T-1 from its logits lt (rows, ldl) of the rows from row0,
 * which are overwritten; work holds em_output_head_scratch_floats' per-position part (the floats
 * after the tile in a thread's scratch); target_logit[t] is set where target[t] is in the tile
 * (target NULL: max and argmax alone). em_output_head_tiles runs it on every tile; the paired head
 * (pair_head.h) on its own logits. */
void em_output_head_tile(float *lt, size_t ldl, int T, int rows, int64_t row0,
                         const int32_t *target, float *work, float *target_logit,
                         em_head_tile *out);

#endif
