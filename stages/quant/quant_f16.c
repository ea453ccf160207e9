/* F16 rows: each float rounded to the nearest half (ties to even), as ggml's
 * ggml_fp32_to_fp16_row; the type llama-quantize falls back to when no block fits a tensor's rows
 * (type_fallback.h). */
#include <stdint.h>

#include "stages/model/half.h"
#include "stages/quant/quant_rows.h"

void em_quantize_row_f16(const float *x, int64_t n, void *out) {
    uint16_t *y = out;
    for (int64_t i = 0; i < n; i++) y[i] = em_f32_to_f16(x[i]);
}
