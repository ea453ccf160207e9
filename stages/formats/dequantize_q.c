/* Rows of ggml's 32-value block types to floats (ggml-common.h block_*, ggml-quants.c
 * dequantize_row_*). In every 4-bit layout byte j of qs holds value j in its low nibble and value
 * j + 16 in its high nibble. The loops are compiled for AVX2 too (target_clones); without fused
 * multiply-adds the vector code does the same float operations, so the floats are the same. */
#include "stages/formats/dequantize_rows.h"

#define QK 32

const int8_t em_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* Q4_0 (18 bytes): f16 d, qs[16]; value = d * (nibble - 8). */
EM_CLONED_ROW(em_q4_0_row) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 18, *qs = block + 2;
        float d = em_half_at(block), *y = dst + b * QK;
        for (int j = 0; j < QK / 2; j++) y[j] = (float)((qs[j] & 0x0f) - 8) * d;
        for (int j = 0; j < QK / 2; j++) y[j + QK / 2] = (float)((qs[j] >> 4) - 8) * d;
    }
}

/* Q4_1 (20 bytes): f16 d, f16 m, qs[16]; value = nibble * d + m. */
EM_CLONED_ROW(em_q4_1_row) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 20, *qs = block + 4;
        float d = em_half_at(block), m = em_half_at(block + 2), *y = dst + b * QK;
        for (int j = 0; j < QK / 2; j++) y[j] = (float)(qs[j] & 0x0f) * d + m;
        for (int j = 0; j < QK / 2; j++) y[j + QK / 2] = (float)(qs[j] >> 4) * d + m;
    }
}

/* The fifth bits of Q5_0/Q5_1: bit j of the little-endian 32-bit qh belongs to value j. */
static uint32_t high_bits(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q5_0 (22 bytes): f16 d, qh[4], qs[16]; value = d * ((nibble | fifth bit << 4) - 16). */
EM_CLONED_ROW(em_q5_0_row) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 22, *qs = block + 6;
        float d = em_half_at(block), *y = dst + b * QK;
        uint32_t qh = high_bits(block + 2);
        for (int j = 0; j < QK / 2; j++) {
            int lo = (qs[j] & 0x0f) | (int)((qh >> j) << 4 & 0x10);
            int hi = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            y[j] = (float)(lo - 16) * d;
            y[j + QK / 2] = (float)(hi - 16) * d;
        }
    }
}

/* Q5_1 (24 bytes): f16 d, f16 m, qh[4], qs[16]; value = (nibble | fifth bit << 4) * d + m. */
EM_CLONED_ROW(em_q5_1_row) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 24, *qs = block + 8;
        float d = em_half_at(block), m = em_half_at(block + 2), *y = dst + b * QK;
        uint32_t qh = high_bits(block + 4);
        for (int j = 0; j < QK / 2; j++) {
            int lo = (qs[j] & 0x0f) | (int)((qh >> j) << 4 & 0x10);
            int hi = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            y[j] = (float)lo * d + m;
            y[j + QK / 2] = (float)hi * d + m;
        }
    }
}

/* Q8_0 (34 bytes): f16 d, int8 qs[32]; value = q * d. */
EM_CLONED_ROW(em_q8_0_row) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 34;
        const int8_t *q = (const int8_t *)(block + 2);
        float d = em_half_at(block), *y = dst + b * QK;
        for (int j = 0; j < QK; j++) y[j] = (float)q[j] * d;
    }
}

/* IQ4_NL (18 bytes): f16 d, qs[16]; value = d * em_iq4nl_values[nibble]. */
EM_CLONED_ROW(em_iq4_nl_row) {
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 18, *qs = block + 2;
        float d = em_half_at(block), *y = dst + b * QK;
        for (int j = 0; j < QK / 2; j++) {
            y[j] = d * (float)em_iq4nl_values[qs[j] & 0x0f];
            y[j + QK / 2] = d * (float)em_iq4nl_values[qs[j] >> 4];
        }
    }
}
