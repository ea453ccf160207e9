/* The torchao tensor types' row functions (see torchao_types.h). */
#include "stages/formats/torchao_types.h"

#include <string.h>

#include "stages/formats/half.h"

void em_torchao_i8_row(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += 36, dst += 32) {
        float s;
        memcpy(&s, b, 4);
        for (int j = 0; j < 32; j++) dst[j] = s * (float)(int8_t)b[4 + j];
    }
}

/* Groups of g values: {bf16 s, bf16 z, g/2 bytes}. */
static void i4_row(const uint8_t *b, float *dst, int64_t n, int g) {
    for (int64_t i = 0; i < n / g; i++, b += 4 + g / 2, dst += g) {
        uint16_t sh, zh;
        memcpy(&sh, b, 2);
        memcpy(&zh, b + 2, 2);
        const float s = em_bf16_to_f32(sh), z = em_bf16_to_f32(zh);
        for (int j = 0; j < g / 2; j++) {
            dst[j] = (float)((b[4 + j] & 0x0F) - 8) * s + z;
            dst[j + g / 2] = (float)((b[4 + j] >> 4) - 8) * s + z;
        }
    }
}

void em_torchao_i4_g32_row(const void *src, float *dst, int64_t n) {
    i4_row(src, dst, n, 32);
}

void em_torchao_i4_g64_row(const void *src, float *dst, int64_t n) {
    i4_row(src, dst, n, 64);
}

void em_torchao_i4_g128_row(const void *src, float *dst, int64_t n) {
    i4_row(src, dst, n, 128);
}

void em_torchao_i4_g256_row(const void *src, float *dst, int64_t n) {
    i4_row(src, dst, n, 256);
}
