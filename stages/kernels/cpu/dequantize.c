/* Weight rows to floats through the tensor-type table's row functions (see dequantize.h). */
#include "stages/kernels/cpu/dequantize.h"

#include "stages/formats/ggml_types.h"

void em_rows_to_float(const em_tensor *w, int64_t row0, int64_t rows, float *dst, int64_t ld) {
    int64_t n_in = w->shape[0];
    const em_ggml_type_info *info = em_ggml_type_info_get((uint32_t)w->type);
    size_t row_bytes = em_tensor_type_row_bytes(w->type, n_in);
    const uint8_t *src = (const uint8_t *)w->data + (size_t)row0 * row_bytes;
    em_ggml_row_fn *to_float = em_ggml_row_function(info);
    for (int64_t r = 0; r < rows; r++, src += row_bytes, dst += ld) to_float(src, dst, n_in);
}
