/* torchao's weight-only schemes (the layouts are in stages/formats/torchao_types.h):
 *   int8_weight_only (torchao, MappingType.SYMMETRIC, one group per output row):
 *     s = max(max|x| / 127.5, FLT_EPSILON), q = clamp(round_half_even(x * (1/s)), -128, 127)
 *   int4_weight_only with group size g (torchtune's Int4WeightOnlyQuantizer, asymmetric with a
 *   float zero point, scales and zeros kept in bf16):
 *     s = bf16(max(max - min, 1e-6) / 15), z = bf16(min + s * 8),
 *     q = clamp(round_half_even((x - bf16(z - s * 8)) / s), 0, 15), x ~ (q - 8) * s + z
 * Arithmetic is float32; the bf16 roundings are those torchtune's bf16 tensors make.
 *
 * Importance-weighted int4 (with an importance matrix, the per-column mean squares qw of the
 * layer's input): the same block layout and dequantization, but per group the (s, z) among these
 * candidates that minimises E = sum_j qw[j] (x[j] - ((q[j] - 8) s + z))^2, each candidate's s and z
 * rounded to bf16 and q requantized against them as above:
 *   - torchtune's own (s, z) (so E is never above the plain scheme's; it wins ties);
 *   - for k = 0..36, the weighted least-squares fit x ~ s * l + lo of the levels
 *     l = clamp(round(iscale (x - min)), 0, 15), iscale = (15 - 0.9 + 0.05 k) / (max - min)
 *     (ggml's make_qkx3_quants search, here with an unconstrained lo), z = lo + 8 s; s > 0 only.
 * qw[j] is the mean of x_j^2 over the calibration tokens: E is then the expected squared error this
 * group adds to the layer's output row. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "stages/formats/half.h"
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

/* The plain int4 error of group x under bf16 (s, z): E as above; q written to q. */
static float int4_error(const float *x, const float *qw, int g, float s, float z, uint8_t *q) {
    const float lo = bf16_round(z - s * 8);
    float e = 0;
    for (int j = 0; j < g; j++) {
        float v = rintf((x[j] - lo) / s);
        q[j] = (uint8_t)(v < 0.0f ? 0 : v > 15.0f ? 15 : (int)v);
        float d = x[j] - ((q[j] - 8) * s + z);
        e += qw[j] * d * d;
    }
    return e;
}

/* One importance-weighted int4 group of g (<= 256) values (see the header comment). */
static void int4_group_weighted(const float *x, const float *qw, int g, uint8_t *y) {
    float min = x[0], max = x[0];
    for (int j = 1; j < g; j++) {
        min = fminf(min, x[j]);
        max = fmaxf(max, x[j]);
    }
    float range = max - min;
    float best_s = bf16_round((range < 1e-6f ? 1e-6f : range) / 15);
    float best_z = bf16_round(min + best_s * 8);
    uint8_t q[256], qc[256];
    float best = int4_error(x, qw, g, best_s, best_z, q);
    for (int k = 0; k <= 36 && range > 0; k++) {
        float iscale = (15 - 0.9f + 0.05f * k) / range;
        float sw = 0, sl = 0, sl2 = 0, sx = 0, sxl = 0;
        for (int j = 0; j < g; j++) {
            float l = rintf(iscale * (x[j] - min));
            l = l < 0.0f ? 0.0f : l > 15.0f ? 15.0f : l;
            sw += qw[j];
            sl += qw[j] * l;
            sl2 += qw[j] * l * l;
            sx += qw[j] * x[j];
            sxl += qw[j] * l * x[j];
        }
        float D = sw * sl2 - sl * sl;
        if (!(D > 0)) continue;
        float s = (sw * sxl - sx * sl) / D, lo = (sl2 * sx - sl * sxl) / D;
        if (!(s > 0)) continue;
        s = bf16_round(s);
        float z = bf16_round(lo + s * 8);
        float e = int4_error(x, qw, g, s, z, qc);
        if (e < best) {
            best = e;
            best_s = s;
            best_z = z;
            memcpy(q, qc, (size_t)g);
        }
    }
    uint16_t sh = em_f32_to_bf16(best_s), zh = em_f32_to_bf16(best_z);
    memcpy(y, &sh, 2);
    memcpy(y + 2, &zh, 2);
    for (int j = 0; j < g / 2; j++) y[4 + j] = (uint8_t)(q[j] | q[j + g / 2] << 4);
}

#define INT4_ROW(g)                                                                                \
    void em_quantize_row_torchao_int4_g##g(const float *x, int64_t n, void *out) {                 \
        uint8_t *y = out;                                                                          \
        for (int64_t b = 0; b < n / (g); b++) int4_group(x + b * (g), g, y + b * (4 + (g) / 2));   \
    }                                                                                              \
    void em_quantize_row_torchao_int4_g##g##_imatrix(const float *x, int64_t n, const float *qw,   \
                                                     void *out) {                                  \
        uint8_t *y = out;                                                                          \
        for (int64_t b = 0; b < n / (g); b++)                                                      \
            int4_group_weighted(x + b * (g), qw + b * (g), g, y + b * (4 + (g) / 2));              \
    }
INT4_ROW(32)
INT4_ROW(64)
INT4_ROW(128)
INT4_ROW(256)
