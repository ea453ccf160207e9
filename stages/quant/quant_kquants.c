/* ggml's K-quant quantizers, same arithmetic in the same order: the reference ones
 * (quantize_row_{q4_K,q5_K,q6_K}_ref, llama-quantize without an importance matrix) and the
 * importance-weighted ones (quantize_row_{q4_K,q5_K,q6_K}_impl with quant_weights, llama-quantize
 * --imatrix); the scale searches are in quant_search.c.
 * Super-blocks of 256 values:
 *   Q4_K {f16 d, f16 dmin, 12 B scales, 128 B qs}: 8 sub-blocks of 32, each x = d*sc*q - dmin*m
 *        with 6-bit sc and m packed in the 12 bytes, q 4 bits
 *   Q5_K {f16 d, f16 dmin, 12 B scales, 32 B qh, 128 B qs}: the same with 5-bit q
 *   Q6_K {128 B ql, 64 B qh, 16 x i8 scales, f16 d}: 16 sub-blocks of 16, x = d*sc*(q - 32),
 *        q 6 bits */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "stages/formats/half.h"
#include "stages/quant/quant_rows.h"
#include "stages/quant/quant_search.h"

#define QK_K 256

static int max_i(int a, int b) {
    return a > b ? a : b;
}

static int min_i(int a, int b) {
    return a < b ? a : b;
}

static float f16_round(float f) {
    return em_f16_to_f32(em_f32_to_f16(f));
}

static void put_f16(uint8_t *p, float f) {
    uint16_t h = em_f32_to_f16(f);
    memcpy(p, &h, 2);
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

/* The shared end of Q4_K and Q5_K: packs the sub-block scales ls[8] and mins lm[8] with the
 * super-block's d and dmin (y's first 16 bytes), then requantizes the values against them into
 * L[256] (in [0, nmax]). */
static void pack_k_scales(const float *x, int nmax, const uint8_t ls[QK_K / 32],
                          const uint8_t lm[QK_K / 32], float d_block, float m_block, uint8_t *y,
                          uint8_t L[QK_K]) {
    uint8_t *sc = y + 4;
    memset(sc, 0, 12);
    for (int j = 0; j < QK_K / 32; ++j) {
        if (j < 4) {
            sc[j] = ls[j];
            sc[j + 4] = lm[j];
        } else {
            sc[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            sc[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            sc[j - 0] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
    put_f16(y, d_block);
    put_f16(y + 2, m_block);
    const float d_all = f16_round(d_block), dmin_all = f16_round(m_block);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t s, m;
        get_scale_min_k4(j, sc, &s, &m);
        const float d = d_all * s;
        if (!d) continue;
        const float dm = dmin_all * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = em_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)max_i(0, min_i(nmax, l));
        }
    }
}

/* quantize_row_q{4,5}_K_ref: per 32-value sub-block a scale and min (weights av_x + |x|), both
 * quantized to 6 bits against the largest. */
static void quantize_k_scales(const float *x, int nmax, float rmin, float rdelta, int nstep,
                              uint8_t *y, uint8_t L[QK_K]) {
    uint8_t Laux[32], ls[QK_K / 32], lm[QK_K / 32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = em_make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                       rmin, rdelta, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        ls[j] = (uint8_t)em_nearest_int(inv_scale * scales[j]);
        lm[j] = (uint8_t)em_nearest_int(inv_min * mins[j]);
        ls[j] = ls[j] < 63 ? ls[j] : 63;
        lm[j] = lm[j] < 63 ? lm[j] : 63;
    }
    pack_k_scales(x, nmax, ls, lm, max_scale / 63.f, max_min / 63.f, y, L);
}

/* quantize_row_q{4,5}_K_impl with quant_weights qw[256] (one per column of the super-block):
 * weights qw * sqrt(sigma2 + x^2) with sigma2 = 2 * mean x^2 over the super-block, a finer search
 * (rmin -0.9, 37 steps of 0.05), and the 6-bit scales and mins fitted with make_qp_quants weighted
 * by each sub-block's summed weights. clamp63: Q5_K clamps the 6-bit values, Q4_K does not. */
static void quantize_k_scales_weighted(const float *x, const float *qw, int nmax, bool clamp63,
                                       uint8_t *y, uint8_t L[QK_K]) {
    uint8_t Laux[32], ls[QK_K / 32], lm[QK_K / 32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
    float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < QK_K / 32; ++j) {
        for (int l = 0; l < 32; ++l)
            weights[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = em_make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                       -0.9f, 0.05f, 36);
    }
    float d_block = em_make_qp_quants(QK_K / 32, 63, scales, ls, sw);
    float m_block = em_make_qp_quants(QK_K / 32, 63, mins, lm, sw);
    if (clamp63)
        for (int j = 0; j < QK_K / 32; ++j) {
            ls[j] = ls[j] < 63 ? ls[j] : 63;
            lm[j] = lm[j] < 63 ? lm[j] : 63;
        }
    pack_k_scales(x, nmax, ls, lm, d_block, m_block, y, L);
}

/* One row of Q4_K; qw: the importance weights of the row's columns, or NULL. */
static void q4_k_row(const float *x, int64_t n, const float *qw, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, y += 144) {
        uint8_t L[QK_K];
        if (qw)
            quantize_k_scales_weighted(x, qw + b * QK_K, 15, false, y, L);
        else
            quantize_k_scales(x, 15, -1.f, 0.1f, 20, y, L);
        uint8_t *q = y + 16;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void q5_k_row(const float *x, int64_t n, const float *qw, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, y += 176) {
        uint8_t L[QK_K];
        if (qw)
            quantize_k_scales_weighted(x, qw + b * QK_K, 31, true, y, L);
        else
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

/* Q6_K: the 16 sub-block scales by make_qx_quants (weights x^2, or qw when given: ggml passes the
 * importance weights as they are here), quantized to int8 against the largest. */
static void q6_k_row(const float *x, int64_t n, const float *qw, void *out) {
    uint8_t *y = out;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, y += 210) {
        int8_t L[QK_K];
        float scales[QK_K / 16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            scales[ib] = em_make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib,
                                           qw ? qw + b * QK_K + 16 * ib : NULL);
            float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < EM_GROUP_MAX_EPS) {
            memset(y, 0, 210);
            continue;
        }
        uint8_t *ql = y, *qh = y + 128;
        int8_t *sc = (int8_t *)(y + 192);
        float iscale = -128.f / max_scale;
        put_f16(y + 208, 1 / iscale);
        const float d_all = f16_round(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            sc[ib] = (int8_t)min_i(127, em_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK_K / 16; ++j) {
            float d = d_all * sc[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = em_nearest_int(x[16 * j + ii] / d);
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

void em_quantize_row_q4_k(const float *x, int64_t n, void *out) {
    q4_k_row(x, n, NULL, out);
}

void em_quantize_row_q5_k(const float *x, int64_t n, void *out) {
    q5_k_row(x, n, NULL, out);
}

void em_quantize_row_q6_k(const float *x, int64_t n, void *out) {
    q6_k_row(x, n, NULL, out);
}

void em_quantize_row_q4_k_imatrix(const float *x, int64_t n, const float *qw, void *out) {
    q4_k_row(x, n, qw, out);
}

void em_quantize_row_q5_k_imatrix(const float *x, int64_t n, const float *qw, void *out) {
    q5_k_row(x, n, qw, out);
}

void em_quantize_row_q6_k_imatrix(const float *x, int64_t n, const float *qw, void *out) {
    q6_k_row(x, n, qw, out);
}
