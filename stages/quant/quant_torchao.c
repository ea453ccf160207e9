/* torchao's weight-only schemes (the layouts are in stages/model/torchao_types.h):
 *   int8_weight_only (torchao, MappingType.SYMMETRIC, one group per output row):
 *     s = max(max|x| / 127.5, FLT_EPSILON), q = clamp(round_half_even(x * (1/s)), -128, 127)
 *   int4_weight_only with group size g (torchtune's Int4WeightOnlyQuantizer, asymmetric with a
 *   float zero point, scales and zeros kept in bf16):
 *     s = bf16(max(max - min, 1e-6) / 15), z = bf16(min + s * 8),
 *     q = clamp(round_half_even((x - bf16(z - s * 8)) / s), 0, 15), x ~ (q - 8) * s + z
 * Arithmetic is float32; the bf16 roundings are those torchtune's bf16 tensors make. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "stages/model/half.h"
#include "stages/quant/quant_rows.h"

static float bf16_round(float f) {
    return em_bf16_to_f32(em_f32_to_bf16(f));
}

void em_quantize_row_torchao_int8(const float *x, int64_t n, void *out) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    float s = amax / 127.5f;
    if (s < FLT_EPSILON) s = FLT_EPSILON;
    const float is = 1.0f / s;
    uint8_t *y = out;
    for (int64_t b = 0; b < n / 32; b++, x += 32, y += 36) {
        memcpy(y, &s, 4);
        for (int j = 0; j < 32; j++) {
            float q = rintf(x[j] * is);
            q = q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q;
            y[4 + j] = (uint8_t)(int8_t)q;
        }
    }
}

/* One int4 group of g values. */
static void int4_group(const float *x, int g, uint8_t *y) {
    float min = x[0], max = x[0];
    for (int j = 1; j < g; j++) {
        min = fminf(min, x[j]);
        max = fmaxf(max, x[j]);
    }
    float range = max - min;
    const float s = bf16_round((range < 1e-6f ? 1e-6f : range) / 15);
    const float z = bf16_round(min + s * 8);
    const float lo = bf16_round(z - s * 8);
    uint16_t sh = em_f32_to_bf16(s), zh = em_f32_to_bf16(z);
    memcpy(y, &sh, 2);
    memcpy(y + 2, &zh, 2);
    uint8_t *qs = y + 4;
    for (int j = 0; j < g / 2; j++) {
        int q[2];
        for (int h = 0; h < 2; h++) {
            float v = rintf((x[j + h * g / 2] - lo) / s);
            q[h] = v < 0.0f ? 0 : v > 15.0f ? 15 : (int)v;
        }
        qs[j] = (uint8_t)(q[0] | q[1] << 4);
    }
}

#define INT4_ROW(g)                                                                                \
    void em_quantize_row_torchao_int4_g##g(const float *x, int64_t n, void *out) {                 \
        uint8_t *y = out;                                                                          \
        for (int64_t b = 0; b < n / (g); b++) int4_group(x + b * (g), g, y + b * (4 + (g) / 2));   \
    }
INT4_ROW(32)
INT4_ROW(64)
INT4_ROW(128)
INT4_ROW(256)
