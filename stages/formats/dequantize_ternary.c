/* Rows of ggml's ternary types to floats (ggml-common.h block_tq1_0, block_tq2_0; ggml-quants.c
 * dequantize_row_tq*): values in {-1, 0, 1} times an f16 scale d at the end of each block of 256.
 */
#include "stages/formats/dequantize_rows.h"

#define QK_K 256

/* The ternary digit of a TQ1_0 byte x for power p of 3, less 1: the byte holds five (or four)
 * digits as a fixed-point fraction of 3^5; multiplying by 3^p (mod 256) brings digit p to the top.
 */
static int8_t tq1_digit(uint8_t x, uint8_t pow3) {
    uint8_t q = (uint8_t)(x * pow3);
    return (int8_t)((int)(((uint16_t)q * 3) >> 8) - 1);
}

/* TQ1_0 (54 bytes): qs[48] (five digits a byte), qh[4] (four digits a byte), f16 d. Values go
 * digit by digit through the bytes: qs[0..31] for digits 0..4 (32 values each), then qs[32..47]
 * (16 each), then qh (4 each). */
void em_tq1_0_values(const uint8_t *block, int8_t v[QK_K]) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *qh = block + 48;
    for (int p = 0; p < 5; p++)
        for (int m = 0; m < 32; m++) *v++ = tq1_digit(block[m], pow3[p]);
    for (int p = 0; p < 5; p++)
        for (int m = 32; m < 48; m++) *v++ = tq1_digit(block[m], pow3[p]);
    for (int p = 0; p < 4; p++)
        for (int j = 0; j < 4; j++) *v++ = tq1_digit(qh[j], pow3[p]);
}

/* TQ2_0 (66 bytes): qs[64] (2 bits a value), f16 d. In each half, bit pair l of qs[32h + m] is
 * value 128h + 32l + m; value = q - 1. */
void em_tq2_0_values(const uint8_t *block, int8_t v[QK_K]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) *v++ = (int8_t)(((block[32 * h + m] >> (2 * l)) & 3) - 1);
}

/* Blocks of `bytes` bytes decoded by `values`, times the f16 d at d_at. */
static void ternary_rows(const void *src, float *dst, int64_t n, int bytes, int d_at,
                         void (*values)(const uint8_t *, int8_t *)) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * bytes;
        int8_t v[QK_K];
        values(block, v);
        float d = em_half_at(block + d_at), *y = dst + b * QK_K;
        for (int j = 0; j < QK_K; j++) y[j] = (float)v[j] * d;
    }
}

void em_tq1_0_row(const void *src, float *dst, int64_t n) {
    ternary_rows(src, dst, n, 54, 52, em_tq1_0_values);
}

void em_tq2_0_row(const void *src, float *dst, int64_t n) {
    ternary_rows(src, dst, n, 66, 64, em_tq2_0_values);
}
