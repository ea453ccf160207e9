/* Rows of ggml's ternary types to floats (ggml-common.h block_tq1_0, block_tq2_0; ggml-quants.c
 * dequantize_row_tq*): values in {-1, 0, 1} times an f16 scale d at the end of each block of 256.
 */
#include "stages/formats/dequantize_rows.h"

#define QK_K 256

/* The ternary digit of a TQ1_0 byte x for power p of 3: the byte holds five (or four) digits as
 * a fixed-point fraction of 3^5; multiplying by 3^p (mod 256) brings digit p to the top. */
static float tq1_digit(uint8_t x, uint8_t pow3) {
    uint8_t q = (uint8_t)(x * pow3);
    return (float)((int)(((uint16_t)q * 3) >> 8) - 1);
}

/* TQ1_0 (54 bytes): qs[48] (five digits a byte), qh[4] (four digits a byte), f16 d. Values go
 * digit by digit through the bytes: qs[0..31] for digits 0..4 (32 values each), then qs[32..47]
 * (16 each), then qh (4 each). */
void em_tq1_0_row(const void *src, float *dst, int64_t n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 54, *qh = block + 48;
        float d = em_half_at(block + 52), *y = dst + b * QK_K;
        for (int p = 0; p < 5; p++)
            for (int m = 0; m < 32; m++) *y++ = tq1_digit(block[m], pow3[p]) * d;
        for (int p = 0; p < 5; p++)
            for (int m = 32; m < 48; m++) *y++ = tq1_digit(block[m], pow3[p]) * d;
        for (int p = 0; p < 4; p++)
            for (int j = 0; j < 4; j++) *y++ = tq1_digit(qh[j], pow3[p]) * d;
    }
}

/* TQ2_0 (66 bytes): qs[64] (2 bits a value), f16 d. In each half, bit pair l of qs[32h + m] is
 * value 128h + 32l + m; value = (q - 1) * d. */
void em_tq2_0_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 66;
        float d = em_half_at(block + 64), *y = dst + b * QK_K;
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++)
                    *y++ = (float)((int)((block[32 * h + m] >> (2 * l)) & 3) - 1) * d;
    }
}
