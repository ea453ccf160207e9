/* Turning rows of a weight matrix, in any supported storage type, into floats. A weight W with
 * shape {n_in, n_out} is n_out rows of n_in values (see stages/model/model.h); quantized types
 * hold blocks of EM_QK values along a row. Conversion is exact (every F16/BF16/Q8_0/Q4_0 value
 * is a float), so the result does not depend on which code path (vector or scalar) produced it. */
#ifndef EVALMESH_KERNELS_DEQUANTIZE_H
#define EVALMESH_KERNELS_DEQUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "stages/model/loaded_model.h"

/* Whether the forward can use weights of this type (F32, F16, BF16, Q8_0, Q4_0). */
bool em_weight_type_supported(em_tensor_type type);

/* dst is (rows, n_in) with row stride ld >= n_in: rows row0 .. row0+rows-1 of w as floats,
 * n_in = w->shape[0]. */
void em_rows_to_float(const em_tensor *w, int64_t row0, int64_t rows, float *dst, int64_t ld);

/* One IEEE half (bits) as a float. */
float em_f16_to_f32(uint16_t h);

/* Whether this CPU converts halves in hardware (AVX and F16C). */
bool em_cpu_has_f16c(void);

#endif
