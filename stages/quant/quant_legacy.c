/* ggml's 32-value block quantizers (quantize_row_{q8_0,q4_0,q4_1,q5_0,q5_1}_ref), same arithmetic:
 *   Q8_0 {f16 d, 32 x i8}:            d = max|x| / 127, q = roundf(x / d)
 *   Q4_0 {f16 d, 16 B nibbles}:       m = the x of largest |x| (first one), d = m / -8,
 *                                     q = min(15, (int8)(x/d + 8.5))  (x = d * (q - 8))
 *   Q4_1 {f16 d, f16 m, 16 B}:        d = (max - min) / 15, q = min(15, (int8)((x - min)/d + 0.5))
 *   Q5_0 {f16 d, u32 qh, 16 B}:       d = m / -16, q = min(31, (int8)(x/d + 16.5))
 *   Q5_1 {f16 d, f16 m, u32 qh, 16 B}: d = (max - min) / 31, q = (uint8)((x - min)/d + 0.5)
 * "x/d" is x * (1/d) (0 when d is 0). Nibbles: value j in the low nibble of byte j for j < 16,
 * in the high nibble of byte j - 16 otherwise; the fifth bits of Q5 go to bit j of qh.
 * With importance weights qw (one per column; llama-quantize --imatrix, ggml's
 * quantize_row_*_impl), each value's weight is qw[j] * sqrt(sigma2 + x[j]^2), sigma2 = mean x^2 of
 * the whole row, and the block is fitted by a weighted search (quant_search.h): Q4_0/Q5_0 by
 * make_qx_quants (nmax 8 / 16), Q4_1/Q5_1 by make_qkx3_quants (nmax 15 / 31, rmin -0.9, 37 steps
 * of 0.05), m = -min. Q8_0 has no weighted form (ggml ignores the weights). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "stages/formats/half.h"
#include "stages/quant/quant_rows.h"
#include "stages/quant/quant_search.h"

#define QK 32

static void put_f16(uint8_t *p, float f) {
    uint16_t h = em_f32_to_f16(f);
    memcpy(p, &h, 2);
}

void em_quantize_row_q8_0(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK; b++, x += QK, y += 2 + QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int j = 0; j < QK; j++) y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

/* The value of largest magnitude, with its sign (the first of equals). */
static float signed_absmax(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void min_max(const float *x, float *min, float *max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

static int min_int(int a, int b) {
    return a < b ? a : b;
}

void em_quantize_row_q4_0(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK; b++, x += QK, y += 18) {
        const float d = signed_absmax(x) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int j = 0; j < QK / 2; j++) {
            int lo = min_int(15, (int8_t)(x[j] * id + 8.5f));
            int hi = min_int(15, (int8_t)(x[j + QK / 2] * id + 8.5f));
            y[2 + j] = (uint8_t)(lo | hi << 4);
        }
    }
}

void em_quantize_row_q4_1(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK; b++, x += QK, y += 20) {
        float min, max;
        min_max(x, &min, &max);
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        put_f16(y + 2, min);
        for (int j = 0; j < QK / 2; j++) {
            int lo = min_int(15, (int8_t)((x[j] - min) * id + 0.5f));
            int hi = min_int(15, (int8_t)((x[j + QK / 2] - min) * id + 0.5f));
            y[4 + j] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* Q5 nibbles and fifth bits of the 5-bit values q[32]. */
static void pack_q5(const uint8_t *q, uint8_t *qh_out, uint8_t *qs) {
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0F) | (q[j + QK / 2] & 0x0F) << 4);
        qh |= ((q[j] & 0x10u) >> 4) << j;
        qh |= ((q[j + QK / 2] & 0x10u) >> 4) << (j + QK / 2);
    }
    memcpy(qh_out, &qh, 4);
}

void em_quantize_row_q5_0(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK; b++, x += QK, y += 22) {
        const float d = signed_absmax(x) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) q[j] = (uint8_t)min_int(31, (int8_t)(x[j] * id + 16.5f));
        pack_q5(q, y + 2, y + 6);
    }
}

void em_quantize_row_q5_1(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK; b++, x += QK, y += 24) {
        float min, max;
        min_max(x, &min, &max);
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        put_f16(y + 2, min);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) q[j] = (uint8_t)((x[j] - min) * id + 0.5f);
        pack_q5(q, y + 4, y + 8);
    }
}

/* The weights qw[j] * sqrt(sigma2 + x[j]^2) of the 32 values of block b of a row. */
static void block_weights(const float *x, const float *qw, float sigma2, float w[QK]) {
    for (int j = 0; j < QK; ++j) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* sigma2 of a row of n values: its mean square. */
static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

void em_quantize_row_q4_0_imatrix(const float *x, int64_t n, const float *qw, void *out) {
    uint8_t *y = out;
    const float sigma2 = row_sigma2(x, n);
    for (int64_t b = 0; b < n / QK; b++, x += QK, qw += QK, y += 18) {
        float w[QK];
        int8_t L[QK];
        block_weights(x, qw, sigma2, w);
        put_f16(y, em_make_qx_quants(QK, 8, x, L, w));
        for (int j = 0; j < QK / 2; ++j) y[2 + j] = (uint8_t)(L[j] | (L[j + QK / 2] << 4));
    }
}

void em_quantize_row_q5_0_imatrix(const float *x, int64_t n, const float *qw, void *out) {
    uint8_t *y = out;
    const float sigma2 = row_sigma2(x, n);
    for (int64_t b = 0; b < n / QK; b++, x += QK, qw += QK, y += 22) {
        float w[QK];
        int8_t L[QK];
        block_weights(x, qw, sigma2, w);
        put_f16(y, em_make_qx_quants(QK, 16, x, L, w));
        pack_q5((const uint8_t *)L, y + 2, y + 6);
    }
}

/* Q4_1 (nmax 15) and Q5_1 (nmax 31): the weighted asymmetric fit of one block, d and m written
 * to y[0..4), the levels to L. */
static void weighted_min_block(const float *x, const float *qw, float sigma2, int nmax, uint8_t *y,
                               uint8_t L[QK]) {
    float w[QK], min;
    uint8_t Laux[QK];
    block_weights(x, qw, sigma2, w);
    float d = em_make_qkx_quants(QK, nmax, x, w, L, &min, Laux, -0.9f, 0.05f, 36);
    put_f16(y, d);
    put_f16(y + 2, -min);
}

void em_quantize_row_q4_1_imatrix(const float *x, int64_t n, const float *qw, void *out) {
    uint8_t *y = out;
    const float sigma2 = row_sigma2(x, n);
    for (int64_t b = 0; b < n / QK; b++, x += QK, qw += QK, y += 20) {
        uint8_t L[QK];
        weighted_min_block(x, qw, sigma2, 15, y, L);
        for (int j = 0; j < QK / 2; ++j) y[4 + j] = (uint8_t)(L[j] | (L[j + QK / 2] << 4));
    }
}

void em_quantize_row_q5_1_imatrix(const float *x, int64_t n, const float *qw, void *out) {
    uint8_t *y = out;
    const float sigma2 = row_sigma2(x, n);
    for (int64_t b = 0; b < n / QK; b++, x += QK, qw += QK, y += 24) {
        uint8_t L[QK];
        weighted_min_block(x, qw, sigma2, 31, y, L);
        pack_q5(L, y + 4, y + 8);
    }
}
