/* The search for non-finite weights: every tensor is turned into floats row by row through its
 * type's row function (ggml_types.h), so a quantized block whose scale is NaN or infinite is
 * found as surely as an F32 NaN. The first non-finite value is named by tensor, type, block (the
 * block's index in the tensor, counting row by row), row and the values the block holds, e.g.
 *   tensor 'blk.1.ffn_up.weight' (Q8_0): block 37 (row 18, values 32..63) holds a non-finite
 *   value (nan)
 * Tensors whose type the table cannot turn into floats are not looked at (the loader refuses
 * them before any stage computes with them). */
#ifndef EVALMESH_FINITE_CHECK_H
#define EVALMESH_FINITE_CHECK_H

#include <stddef.h>

#include "util/error.h"
#include "stages/model/loaded_model.h"

/* Files below this size are checked when the model stage says check_finite: auto. */
#define EM_FINITE_CHECK_AUTO_BYTES ((uint64_t)2 << 30)

/* NULL when every value of tensors[0..count) is finite; else an error with exit_code naming the
 * first non-finite value (above). */
em_status em_tensors_check_finite(const em_tensor *tensors, size_t count, int exit_code);

#endif
