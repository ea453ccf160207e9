/* ggml's K-quant reference quantizers (quantize_row_{q4_K,q5_K,q6_K}_ref with their helpers
 * nearest_int, make_qkx2_quants and make_qx_quants), same arithmetic in the same order.
 * Super-blocks of 256 values:
 *   Q4_K {f16 d, f16 dmin, 12 B scales, 128 B qs}: 8 sub-blocks of 32, each x = d*sc*q - dmin*m
 *        with 6-bit sc and m packed in the 12 bytes, q 4 bits
 *   Q5_K {f16 d, f16 dmin, 12 B scales, 32 B qh, 128 B qs}: the same with 5-bit q
 *   Q6_K {128 B ql, 64 B qh, 16 x i8 scales, f16 d}: 16 sub-blocks of 16, x = d*sc*(q - 32),
 *        q 6 bits */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "stages/model/half.h"
#include "stages/quant/quant_rows.h"

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f

static int max_i(int a, int b) {
    return a > b ? a : b;
}

static int min_i(int a, int b) {
    return a < b ? a : b;
}

/* Round to nearest (ties to even) through the float adder: |f| <= 2^22 - 1. */
static int nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static float f16_round(float f) {
    return em_f16_to_f32(em_f32_to_f16(f));
}

static void put_f16(uint8_t *p, float f) {
    uint16_t h = em_f32_to_f16(f);
    memcpy(p, &h, 2);
}

/* Fits x[i] ~ scale * L[i] - the_min with L in [0, nmax] minimizing the weighted error, trying
 * nstep + 1 grid scales around nmax / (max - min). Returns the scale. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)max_i(0, min_i(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = max_i(0, min_i(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Symmetric fit x[i] ~ scale * (L[i] - nmax), L in [0, 2 nmax - 1], weights x^2 (ggml's
 * rmse_type 1 without importance weights), trying 19 scales around -nmax / max. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = max_i(-nmax, min_i(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = max_i(-nmax, min_i(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + max_i(-nmax, min_i(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Sub-block j's 6-bit scale and min from the 12 packed bytes of Q4_K/Q5_K. */
static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* The shared part of Q4_K and Q5_K: per 32-value sub-block a scale and min (make_qkx2_quants with
 * the given search), both quantized to 6 bits against the super-block's d and dmin, then the
 * values requantized with those; writes d, dmin and scales (the first 16 bytes) and L. */
static void quantize_k_scales(const float *x, int nmax, float rmin, float rdelta, int nstep,
                              uint8_t *y, uint8_t L[QK_K]) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, rdelta, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    uint8_t *sc = y + 4;
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    put_f16(y, max_scale / 63.f);
    put_f16(y + 2, max_min / 63.f);
    const float d_all = f16_round(max_scale / 63.f), dmin_all = f16_round(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t s, m;
        get_scale_min_k4(j, sc, &s, &m);
        const float d = d_all * s;
        if (!d) continue;
        const float dm = dmin_all * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)max_i(0, min_i(nmax, l));
        }
    }
}

void em_quantize_row_q4_k(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, y += 144) {
        uint8_t L[QK_K];
        memset(y + 4, 0, 12);
        quantize_k_scales(x, 15, -1.f, 0.1f, 20, y, L);
        uint8_t *q = y + 16;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void em_quantize_row_q5_k(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, y += 176) {
        uint8_t L[QK_K];
        memset(y + 4, 0, 12);
        quantize_k_scales(x, 31, -0.5f, 0.1f, 15, y, L);
        uint8_t *qh = y + 16, *ql = y + 48;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n64 = 0; n64 < QK_K; n64 += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n64 + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[n64 + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
    }
}

void em_quantize_row_q6_k(const float *x, int64_t n, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, y += 210) {
        int8_t L[QK_K];
        float scales[QK_K / 16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, 210);
            continue;
        }
        uint8_t *ql = y, *qh = y + 128;
        int8_t *sc = (int8_t *)(y + 192);
        float iscale = -128.f / max_scale;
        put_f16(y + 208, 1 / iscale);
        const float d_all = f16_round(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            sc[ib] = (int8_t)min_i(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK_K / 16; ++j) {
            float d = d_all * sc[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(max_i(-32, min_i(31, l)) + 32);
            }
        }
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}
