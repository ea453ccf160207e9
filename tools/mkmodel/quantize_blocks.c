/* The model maker's quantizers (see quantize_blocks.h). */
#include "quantize_blocks.h"

#include <math.h>
#include <string.h>

#include "stages/formats/dequantize_rows.h"
#include "stages/formats/half.h"

#define QK 32
#define QK_K 256

static void put_half(uint8_t *p, float f) {
    uint16_t h = em_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* A half-rounded scale and its inverse (0 for 0). */
static float half_scale(float d, float *inverse) {
    d = em_f16_to_f32(em_f32_to_f16(d));
    *inverse = d != 0 ? 1.0f / d : 0.0f;
    return d;
}

static int clamp(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

static void f32_block(const float *x, int64_t n, void *out) {
    memcpy(out, x, (size_t)n * sizeof(float));
}

static void f16_block(const float *x, int64_t n, void *out) {
    for (int64_t i = 0; i < n; i++) put_half((uint8_t *)out + 2 * i, x[i]);
}

static void bf16_block(const float *x, int64_t n, void *out) {
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = em_f32_to_bf16(x[i]);
        memcpy((uint8_t *)out + 2 * i, &h, 2);
    }
}

/* llama.cpp's reference: d = max|x| / 127, q = round(x / d). */
static void q8_0_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK; b++, block += 34) {
        const float *v = x + b * QK;
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        put_half(block, d);
        for (int j = 0; j < QK; j++) block[2 + j] = (uint8_t)(int8_t)roundf(v[j] * id);
    }
}

/* The value of largest magnitude, with its sign. */
static float signed_max(const float *v, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(v[j]) > amax) {
            amax = fabsf(v[j]);
            max = v[j];
        }
    return max;
}

/* llama.cpp's reference: d = signed max / -8, q = min(15, (int)(x/d + 8.5)). */
static void q4_0_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK; b++, block += 18) {
        const float *v = x + b * QK;
        float d = signed_max(v, QK) / -8.0f, id = d ? 1.0f / d : 0.0f;
        put_half(block, d);
        for (int j = 0; j < QK / 2; j++) {
            int lo = clamp((int)(v[j] * id + 8.5f), 0, 15);
            int hi = clamp((int)(v[j + QK / 2] * id + 8.5f), 0, 15);
            block[2 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* Q5_0 (symmetric, 32 levels) and the min/scale types Q4_1 (16 levels), Q5_1 (32 levels): the
 * 4-bit parts in qs, the fifth bits in qh. */
static void q4_1_q5_block(const float *x, int64_t n, void *out, int levels, bool with_min) {
    size_t bytes = (with_min ? 4 : 2) + (levels == 32 ? 4 : 0) + QK / 2;
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK; b++, block += bytes) {
        const float *v = x + b * QK;
        float min = v[0], max = v[0];
        for (int j = 1; j < QK; j++) {
            min = fminf(min, v[j]);
            max = fmaxf(max, v[j]);
        }
        float id, d, m = 0;
        if (with_min) {
            d = half_scale((max - min) / (float)(levels - 1), &id);
            m = em_f16_to_f32(em_f32_to_f16(min));
            put_half(block + 2, m);
        } else {
            d = half_scale(signed_max(v, QK) / -(float)(levels / 2), &id);
        }
        put_half(block, d);
        uint8_t *qh = block + (with_min ? 4 : 2), *qs = qh + (levels == 32 ? 4 : 0);
        uint32_t high = 0;
        for (int j = 0; j < QK; j++) {
            int q = with_min ? (int)lroundf((v[j] - m) * id) : (int)lroundf(v[j] * id) + levels / 2;
            q = clamp(q, 0, levels - 1);
            if (j < QK / 2)
                qs[j] = (uint8_t)(q & 0x0f);
            else
                qs[j - QK / 2] |= (uint8_t)((q & 0x0f) << 4);
            high |= (uint32_t)(q >> 4) << j;
        }
        if (levels == 32)
            for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(high >> (8 * k));
    }
}

static void q4_1_block(const float *x, int64_t n, void *out) {
    q4_1_q5_block(x, n, out, 16, true);
}

static void q5_0_block(const float *x, int64_t n, void *out) {
    q4_1_q5_block(x, n, out, 32, false);
}

static void q5_1_block(const float *x, int64_t n, void *out) {
    q4_1_q5_block(x, n, out, 32, true);
}

/* Min/scale super-blocks (Q2_K, Q4_K, Q5_K): for each of the `subs` sub-blocks of 256/subs
 * values, scale = (max - min) / (levels - 1) and min = -min(0, min), as integers sc, mn (up to
 * max_sc) times the super-block's d and dmin; q[i] is each value's level. */
static void min_scale_levels(const float *v, int subs, int levels, int max_sc, float *d,
                             float *dmin, uint8_t *sc, uint8_t *mn, uint8_t *q) {
    int len = QK_K / subs;
    float scale[16], mins[16], max_scale = 0, max_min = 0;
    for (int s = 0; s < subs; s++) {
        float lo = 0, hi = 0;
        for (int j = 0; j < len; j++) {
            lo = fminf(lo, v[s * len + j]);
            hi = fmaxf(hi, v[s * len + j]);
        }
        scale[s] = (hi - lo) / (float)(levels - 1);
        mins[s] = -lo;
        max_scale = fmaxf(max_scale, scale[s]);
        max_min = fmaxf(max_min, mins[s]);
    }
    float id, idmin;
    *d = half_scale(max_scale / (float)max_sc, &id);
    *dmin = half_scale(max_min / (float)max_sc, &idmin);
    for (int s = 0; s < subs; s++) {
        sc[s] = (uint8_t)clamp((int)lroundf(scale[s] * id), 0, max_sc);
        mn[s] = (uint8_t)clamp((int)lroundf(mins[s] * idmin), 0, max_sc);
        float dl = *d * (float)sc[s], ml = *dmin * (float)mn[s], idl = dl != 0 ? 1.0f / dl : 0;
        for (int j = 0; j < len; j++)
            q[s * len + j] =
                (uint8_t)clamp((int)lroundf((v[s * len + j] + ml) * idl), 0, levels - 1);
    }
}

/* Q2_K: scales[16] (scale | min << 4), qs[64], d, dmin; value v's two bits are bits 2k of
 * qs[32h + v%32] with h = v/128, k = (v%128)/32. */
static void q2_k_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK_K; b++, block += 84) {
        float d, dmin;
        uint8_t sc[16], mn[16], q[QK_K];
        min_scale_levels(x + b * QK_K, 16, 4, 15, &d, &dmin, sc, mn, q);
        memset(block, 0, 84);
        for (int s = 0; s < 16; s++) block[s] = (uint8_t)(sc[s] | mn[s] << 4);
        for (int v = 0; v < QK_K; v++)
            block[16 + 32 * (v / 128) + v % 32] |= (uint8_t)(q[v] << (2 * ((v % 128) / 32)));
        put_half(block + 80, d);
        put_half(block + 82, dmin);
    }
}

/* The 12 bytes of Q4_K/Q5_K scales and mins (inverse of get_scale_min_k4). */
static void pack_k4_scales(const uint8_t *sc, const uint8_t *mn, uint8_t *out) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | (mn[j + 4] & 0x0f) << 4);
    }
}

/* Q4_K and Q5_K: d, dmin, scales[12], (Q5_K: qh[32]), qs[128]; value v in sub-block s = v/32,
 * nibble s%2 of qs[32 (s/2) + v%32], fifth bit s of qh[v%32]. */
static void q4_5_k_block(const float *x, int64_t n, void *out, bool five) {
    size_t bytes = five ? 176 : 144;
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK_K; b++, block += bytes) {
        float d, dmin;
        uint8_t sc[8], mn[8], q[QK_K];
        min_scale_levels(x + b * QK_K, 8, five ? 32 : 16, 63, &d, &dmin, sc, mn, q);
        memset(block, 0, bytes);
        put_half(block, d);
        put_half(block + 2, dmin);
        pack_k4_scales(sc, mn, block + 4);
        uint8_t *qh = block + 16, *qs = block + (five ? 48 : 16);
        for (int v = 0; v < QK_K; v++) {
            int s = v / 32;
            qs[32 * (s / 2) + v % 32] |= (uint8_t)((q[v] & 0x0f) << (4 * (s % 2)));
            if (five) qh[v % 32] |= (uint8_t)((q[v] >> 4) << s);
        }
    }
}

static void q4_k_block(const float *x, int64_t n, void *out) {
    q4_5_k_block(x, n, out, false);
}

static void q5_k_block(const float *x, int64_t n, void *out) {
    q4_5_k_block(x, n, out, true);
}

/* Symmetric super-blocks (Q3_K, Q6_K): per 16 values a signed integer scale (|sc| <= max_sc)
 * times d, levels -half .. half-1. */
static float symmetric_levels(const float *v, int half, int max_sc, int8_t *sc, int *q) {
    float scale[16], max_scale = 0, id;
    for (int s = 0; s < 16; s++) {
        scale[s] = signed_max(v + 16 * s, 16) / -(float)half;
        max_scale = fmaxf(max_scale, fabsf(scale[s]));
    }
    float d = half_scale(max_scale / (float)max_sc, &id);
    for (int s = 0; s < 16; s++) {
        sc[s] = (int8_t)clamp((int)lroundf(scale[s] * id), -max_sc, max_sc);
        float dl = d * (float)sc[s], idl = dl != 0 ? 1.0f / dl : 0;
        for (int j = 0; j < 16; j++)
            q[16 * s + j] = clamp((int)lroundf(v[16 * s + j] * idl), -half, half - 1);
    }
    return d;
}

/* Q3_K: hmask[32], qs[64] (as Q2_K), scales[12], d; level q + 4 in 0..7: its two low bits in qs,
 * its third in bit v/32 of hmask[v%32]; 6-bit scales sc + 32. */
static void q3_k_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK_K; b++, block += 110) {
        int8_t sc[16];
        int q[QK_K];
        float d = symmetric_levels(x + b * QK_K, 4, 31, sc, q);
        memset(block, 0, 110);
        for (int v = 0; v < QK_K; v++) {
            int l = q[v] + 4;
            block[32 + 32 * (v / 128) + v % 32] |= (uint8_t)((l & 3) << (2 * ((v % 128) / 32)));
            block[v % 32] |= (uint8_t)((l >> 2) << (v / 32));
        }
        for (int i = 0; i < 16; i++) {
            int s = sc[i] + 32;
            block[96 + i % 8] |= (uint8_t)((s & 0x0f) << (4 * (i / 8)));
            block[96 + 8 + i % 4] |= (uint8_t)((s >> 4) << (2 * (i / 4)));
        }
        put_half(block + 108, d);
    }
}

/* Q6_K: ql[128], qh[64], scales[16], d; level q + 32 in 0..63 of value v = 128h + 32g + l: low
 * nibble in ql[64h + l + 32 (g%2)] (high half of the byte for g >= 2), two high bits at bits 2g
 * of qh[32h + l]. */
static void q6_k_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK_K; b++, block += 210) {
        int8_t sc[16];
        int q[QK_K];
        float d = symmetric_levels(x + b * QK_K, 32, 127, sc, q);
        memset(block, 0, 210);
        for (int v = 0; v < QK_K; v++) {
            int h = v / 128, g = (v % 128) / 32, l = v % 32, level = q[v] + 32;
            block[64 * h + l + 32 * (g % 2)] |= (uint8_t)((level & 0x0f) << (4 * (g / 2)));
            block[128 + 32 * h + l] |= (uint8_t)((level >> 4) << (2 * g));
        }
        memcpy(block + 192, sc, 16);
        put_half(block + 208, d);
    }
}

/* The em_iq4nl_values index nearest to x. */
static int nearest_iq4(float x) {
    int best = 0;
    for (int i = 1; i < 16; i++)
        if (fabsf(x - (float)em_iq4nl_values[i]) < fabsf(x - (float)em_iq4nl_values[best]))
            best = i;
    return best;
}

/* 32 values to 16 bytes of nearest IQ4 indexes at scale dl. */
static void iq4_nibbles(const float *v, float dl, uint8_t *qs) {
    float idl = dl != 0 ? 1.0f / dl : 0;
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(nearest_iq4(v[j] * idl) | nearest_iq4(v[j + 16] * idl) << 4);
}

/* IQ4_NL: d = signed max / -127 (the table's largest magnitude), nearest table entries. */
static void iq4_nl_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK; b++, block += 18) {
        float id, d = half_scale(signed_max(x + b * QK, QK) / -127.0f, &id);
        put_half(block, d);
        iq4_nibbles(x + b * QK, d, block + 2);
    }
}

/* IQ4_XS: d, scales_h, scales_l[4], qs[128]; sub-block scales ls - 32 in -32..31 times d. */
static void iq4_xs_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK_K; b++, block += 136) {
        const float *v = x + b * QK_K;
        float scale[8], max_scale = 0, id;
        for (int s = 0; s < 8; s++) {
            scale[s] = signed_max(v + 32 * s, 32) / -127.0f;
            max_scale = fmaxf(max_scale, fabsf(scale[s]));
        }
        float d = half_scale(max_scale / 31.0f, &id);
        memset(block, 0, 136);
        put_half(block, d);
        unsigned scales_h = 0;
        for (int s = 0; s < 8; s++) {
            int ls = clamp((int)lroundf(scale[s] * id), -31, 31) + 32;
            block[4 + s / 2] |= (uint8_t)((ls & 0x0f) << (4 * (s % 2)));
            scales_h |= (unsigned)(ls >> 4) << (2 * s);
            iq4_nibbles(v + 32 * s, d * (float)(ls - 32), block + 8 + 16 * s);
        }
        block[2] = (uint8_t)scales_h;
        block[3] = (uint8_t)(scales_h >> 8);
    }
}

/* TQ2_0: qs[64], d = max|x|; value (q - 1) * d with q = round(x / d) + 1 in bits 2l of
 * qs[32h + m] for value 128h + 32l + m. */
static void tq2_0_block(const float *x, int64_t n, void *out) {
    uint8_t *block = out;
    for (int64_t b = 0; b < n / QK_K; b++, block += 66) {
        const float *v = x + b * QK_K;
        float amax = 0, id;
        for (int j = 0; j < QK_K; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = half_scale(amax, &id);
        memset(block, 0, 66);
        for (int j = 0; j < QK_K; j++) {
            int q = clamp((int)lroundf(v[j] * id), -1, 1) + 1;
            block[32 * (j / 128) + j % 32] |= (uint8_t)(q << (2 * ((j % 128) / 32)));
        }
        put_half(block + 64, d);
    }
}

static const struct {
    uint32_t type;
    quantize_fn *fn;
} quantizers[] = {
    {0, f32_block},   {1, f16_block},     {30, bf16_block},   {8, q8_0_block},
    {2, q4_0_block},  {3, q4_1_block},    {6, q5_0_block},    {7, q5_1_block},
    {10, q2_k_block}, {11, q3_k_block},   {12, q4_k_block},   {13, q5_k_block},
    {14, q6_k_block}, {20, iq4_nl_block}, {23, iq4_xs_block}, {35, tq2_0_block},
};

quantize_fn *quantizer_for(uint32_t type) {
    for (size_t i = 0; i < sizeof quantizers / sizeof quantizers[0]; i++)
        if (quantizers[i].type == type) return quantizers[i].fn;
    return NULL;
}
