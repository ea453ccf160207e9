/* Turning rows of a weight matrix, in any type of the tensor-type table, into floats. A weight W
 * with shape {n_in, n_out} is n_out rows of n_in values (see stages/model/loaded_model.h); a row
 * of a quantized type is n_in / block size blocks. Conversion goes through the table's row
 * functions (stages/formats/ggml_types.h), which are exact, so the result does not depend on which
 * code path (vector or scalar) produced it. */
#ifndef EVALMESH_KERNELS_DEQUANTIZE_H
#define EVALMESH_KERNELS_DEQUANTIZE_H

#include <stdint.h>

#include "stages/model/loaded_model.h"

/* dst is (rows, n_in) with row stride ld >= n_in: rows row0 .. row0+rows-1 of w as floats,
 * n_in = w->shape[0]. The type must have a row function (em_ggml_type_supported). */
void em_rows_to_float(const em_tensor *w, int64_t row0, int64_t rows, float *dst, int64_t ld);

#endif
