/* Rows of ggml's FP4 microscaling types to floats (ggml-common.h block_mxfp4, block_nvfp4;
 * ggml-quants.c dequantize_row_mxfp4/nvfp4). Both hold E2M1 codes, which ggml keeps doubled as
 * small integers (mxfp4_values) and pairs with a halved scale: value = code value * scale. */
#include "stages/formats/dequantize_rows.h"

const int8_t em_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* An unsigned E4M3 scale byte (4 exponent bits, bias 7, 3 mantissa bits; the top bit ignored;
 * 0x7F, E4M3's NaN, is 0), halved. */
static float ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    uint32_t exp = (x >> 3) & 0x0f, man = x & 7;
    float raw =
        exp == 0 ? (float)man * (1.0f / 512.0f) : em_f32_from_bits((exp + 120) << 23 | man << 20);
    return raw * 0.5f;
}

/* MXFP4 (17 bytes, 32 values): an E8M0 exponent, qs[16] (value j in the low nibble of byte j,
 * value j + 16 in the high nibble). */
void em_mxfp4_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 17, *qs = block + 1;
        float d = em_e8m0_half(block[0]), *y = dst + b * 32;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)em_mxfp4_values[qs[j] & 0x0f] * d;
            y[j + 16] = (float)em_mxfp4_values[qs[j] >> 4] * d;
        }
    }
}

/* NVFP4 (36 bytes, 64 values): four UE4M3 scales, one per 16 values, then qs[32]: sub-block s
 * is qs[8s .. 8s+7], value j < 8 in the low nibble of byte j, value j + 8 in the high nibble. */
void em_nvfp4_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / 64; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 36;
        for (int s = 0; s < 4; s++) {
            const uint8_t *qs = block + 4 + 8 * s;
            float d = ue4m3_half(block[s]), *y = dst + b * 64 + 16 * s;
            for (int j = 0; j < 8; j++) {
                y[j] = (float)em_mxfp4_values[qs[j] & 0x0f] * d;
                y[j + 8] = (float)em_mxfp4_values[qs[j] >> 4] * d;
            }
        }
    }
}
