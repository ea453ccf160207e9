/* Rows of ggml's super-block types (256 values) to floats: the K-quants and IQ4_XS
 * (ggml-common.h block_q*_K, block_iq4_xs; ggml-quants.c dequantize_row_*). Each super-block has
 * an f16 scale d (and for Q2_K, Q4_K, Q5_K an f16 dmin) and small per-sub-block scales; the
 * loops are compiled for AVX2 too (target_clones), which without fused multiply-adds gives the
 * same floats. */
#include "stages/formats/dequantize_rows.h"

#define QK_K 256

/* Q2_K (84 bytes): scales[16] (low nibble: scale, high: min, per 16 values), qs[64] (2 bits per
 * value), f16 d, f16 dmin. Values come in two halves of 128; in each, bit pair `shift` of qs[l]
 * for l < 32 gives values 32 * (shift/2) + l. value = d*scale * q - dmin*min. */
EM_CLONED_ROW(em_q2_k_row) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 84, *scales = block, *q = block + 16;
        float d = em_half_at(block + 80), min = em_half_at(block + 82), *y = dst + b * QK_K;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    uint8_t sc = scales[is++];
                    float dl = d * (float)(sc & 0x0f), ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[l + 16 * part] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* Q3_K (110 bytes): hmask[32], qs[64], scales[12], f16 d. Value = d*scale * (q - 4 when its
 * hmask bit is clear), with q two bits of qs laid out as in Q2_K and the hmask bit of value
 * 32*k + l being bit k of hmask[l]. */
EM_CLONED_ROW(em_q3_k_row) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 110, *hm = block, *q = block + 32;
        float d = em_half_at(block + 108), *y = dst + b * QK_K;
        int8_t scales[16];
        em_k3_scales(block + 96, scales);
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int part = 0; part < 2; part++) {
                    float dl = d * (float)scales[is++];
                    for (int l = 16 * part; l < 16 * part + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

/* Q4_K (144 bytes): f16 d, f16 dmin, scales[12], qs[128]. Sub-blocks of 32 values in pairs: 32
 * bytes of qs hold the first of a pair in low nibbles, the second in high nibbles.
 * value = d*scale * q - dmin*min. */
EM_CLONED_ROW(em_q4_k_row) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 144, *q = block + 16;
        float d = em_half_at(block), min = em_half_at(block + 2), *y = dst + b * QK_K;
        for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
            uint8_t sc, m;
            em_k4_scale_min(is, block + 4, &sc, &m);
            float d1 = d * (float)sc, m1 = min * (float)m;
            em_k4_scale_min(is + 1, block + 4, &sc, &m);
            float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) y[l] = d1 * (float)(q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++) y[l + 32] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K (176 bytes): f16 d, f16 dmin, scales[12], qh[32], qs[128]: Q4_K with a fifth bit, that
 * of value 32*k + l being bit k of qh[l]. */
EM_CLONED_ROW(em_q5_k_row) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 176, *qh = block + 16, *q = block + 48;
        float d = em_half_at(block), min = em_half_at(block + 2), *y = dst + b * QK_K;
        for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
            uint8_t sc, m;
            em_k4_scale_min(is, block + 4, &sc, &m);
            float d1 = d * (float)sc, m1 = min * (float)m;
            em_k4_scale_min(is + 1, block + 4, &sc, &m);
            float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                y[l] = d1 * (float)((q[l] & 0x0f) | ((qh[l] >> is) & 1) << 4) - m1;
            for (int l = 0; l < 32; l++)
                y[l + 32] = d2 * (float)((q[l] >> 4) | ((qh[l] >> (is + 1)) & 1) << 4) - m2;
        }
    }
}

/* Q6_K (210 bytes): ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one per 16
 * values), f16 d. In each half of 128 values, for l < 32: values l, l+32, l+64, l+96 are the low
 * and high nibbles of ql[l], ql[l+32] with bit pairs 0, 1, 2, 3 of qh[l];
 * value = d * scale * (q - 32). */
EM_CLONED_ROW(em_q6_k_row) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 210, *ql = block, *qh = block + 128;
        const int8_t *sc = (const int8_t *)(block + 192);
        float d = em_half_at(block + 208), *y = dst + b * QK_K;
        /* ggml computes d * sc[is] * q left to right: (d * sc) is dl */
        for (int half = 0; half < 2; half++, ql += 64, qh += 32) {
            for (int g = 0; g < 4; g++) {
                const uint8_t *lo = ql + 32 * (g % 2);
                for (int part = 0; part < 2; part++, y += 16) {
                    float dl = d * (float)sc[8 * half + 2 * g + part];
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        int q = ((lo[l] >> (4 * (g / 2))) & 0x0f) | ((qh[l] >> (2 * g)) & 3) << 4;
                        y[l - 16 * part] = dl * (float)(q - 32);
                    }
                }
            }
        }
    }
}

/* IQ4_XS (136 bytes): f16 d, u16 scales_h, scales_l[4], qs[128]. Sub-block ib of 32 values has
 * the scale em_iq4_xs_scale and its 16 bytes of qs as in IQ4_NL; value = d * scale *
 * em_iq4nl_values[nibble]. */
EM_CLONED_ROW(em_iq4_xs_row) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 136, *qs = block + 8;
        float d = em_half_at(block), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
            float dl = d * (float)em_iq4_xs_scale(block, ib);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)em_iq4nl_values[qs[j] & 0x0f];
                y[j + 16] = dl * (float)em_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}
