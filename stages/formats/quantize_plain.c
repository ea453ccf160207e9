/* The plain types' from_float (see quantize_rows.h): F32 copied, F16 and BF16 rounded to nearest
 * even (half.h), as ggml's fp32_to_fp16 and fp32_to_bf16 rows. */
#include <string.h>

#include "stages/formats/half.h"
#include "stages/formats/quantize_rows.h"

void em_quantize_row_f32(const float *x, int64_t n, void *out) {
    memcpy(out, x, (size_t)n * sizeof(float));
}

void em_quantize_row_f16(const float *x, int64_t n, void *out) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = em_f32_to_f16(x[i]);
        memcpy((uint8_t *)out + 2 * i, &h, 2);
    }
}

void em_quantize_row_bf16(const float *x, int64_t n, void *out) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = em_f32_to_bf16(x[i]);
        memcpy((uint8_t *)out + 2 * i, &h, 2);
    }
}
