/* Rows of ggml's lattice ("i-quant") types to floats (ggml-common.h block_iq*, ggml-quants.c
 * dequantize_row_iq*). Each super-block of 256 values is 8 sub-blocks of 32, each made of grid
 * points (8 or 4 coordinates, iq_grids.h) chosen by index, with per-point signs (IQ2, IQ3) or a
 * shift (IQ1), times a sub-block scale. */
#include "stages/formats/dequantize_rows.h"
#include "stages/formats/iq_grids.h"

#define QK_K 256
#define IQ1_DELTA 0.125f

static uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned u16_at(const uint8_t *p) {
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

/* 8 values db * point[j], coordinate j negated where bit j of signs is set. */
static void signed_point(float db, uint64_t point, unsigned signs, float *y) {
    for (int j = 0; j < 8; j++)
        y[j] = db * (float)em_iq_grid_byte(point, j) * ((signs >> j) & 1 ? -1.f : 1.f);
}

/* IQ2_XXS (66 bytes): f16 d, then per sub-block 8 bytes: 4 grid indexes (em_iq2xxs_grid), and a
 * 32-bit word of four 7-bit sign indexes (em_iq_signs) and a 4-bit scale s in its top bits;
 * db = d * (0.5 + s) * 0.25. */
void em_iq2_xxs_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 66;
        float d = em_half_at(block), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *sub = block + 2 + 8 * ib;
            uint32_t aux = u32_at(sub + 4);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8)
                signed_point(db, em_iq2xxs_grid[sub[l]], em_iq_signs((aux >> (7 * l)) & 127), y);
        }
    }
}

/* IQ2_XS (74 bytes): f16 d, u16 qs[32] (9-bit index into em_iq2xs_grid, 7-bit sign index),
 * scales[8] (two 4-bit scales per sub-block, one per half); db = d * (0.5 + s) * 0.25. */
void em_iq2_xs_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 74, *scales = block + 66;
        float d = em_half_at(block), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++) {
            float db[2] = {d * (0.5f + (float)(scales[ib] & 0x0f)) * 0.25f,
                           d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                unsigned q = u16_at(block + 2 + 2 * (4 * ib + l));
                signed_point(db[l / 2], em_iq2xs_grid[q & 511], em_iq_signs(q >> 9), y);
            }
        }
    }
}

/* IQ2_S (82 bytes): f16 d, qs[32] (low 8 bits of the indexes into em_iq2s_grid), signs[32] (a
 * byte of sign bits per point), qh[8] (2 more index bits per point), scales[8] as in IQ2_XS. */
void em_iq2_s_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 82, *qs = block + 2, *signs = block + 34;
        const uint8_t *qh = block + 66, *scales = block + 74;
        float d = em_half_at(block), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
            float db[2] = {d * (0.5f + (float)(scales[ib] & 0x0f)) * 0.25f,
                           d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                unsigned index = qs[l] | ((unsigned)qh[ib] << (8 - 2 * l) & 0x300);
                signed_point(db[l / 2], em_iq2s_grid[index], signs[l], y);
            }
        }
    }
}

/* 8 values: two 4-coordinate points, signs as in signed_point. */
static void signed_pair(float db, uint32_t p1, uint32_t p2, unsigned signs, float *y) {
    for (int j = 0; j < 4; j++) {
        y[j] = db * (float)em_iq_grid_byte(p1, j) * ((signs >> j) & 1 ? -1.f : 1.f);
        y[j + 4] = db * (float)em_iq_grid_byte(p2, j) * ((signs >> (j + 4)) & 1 ? -1.f : 1.f);
    }
}

/* IQ3_XXS (98 bytes): f16 d, qs[64] (indexes into em_iq3xxs_grid, two points per 8 values), then
 * per sub-block a 32-bit word of sign indexes and scale as in IQ2_XXS; db = d * (0.5 + s) * 0.5. */
void em_iq3_xxs_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 98, *qs = block + 2;
        float d = em_half_at(block), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            uint32_t aux = u32_at(block + 66 + 4 * ib);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8)
                signed_pair(db, em_iq3xxs_grid[qs[2 * l]], em_iq3xxs_grid[qs[2 * l + 1]],
                            em_iq_signs((aux >> (7 * l)) & 127), y);
        }
    }
}

/* IQ3_S (110 bytes): f16 d, qs[64] (low 8 bits of indexes into em_iq3s_grid), qh[8] (the ninth
 * bit of index k is bit k%8 of qh[k/8]), signs[32] (a byte per 8 values), scales[4] (a 4-bit
 * scale s per sub-block); db = d * (1 + 2s). */
void em_iq3_s_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 110, *qs = block + 2, *qh = block + 66;
        const uint8_t *signs = block + 74, *scales = block + 106;
        float d = em_half_at(block), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
            float db = d * (float)(1 + 2 * ((scales[ib / 2] >> (4 * (ib % 2))) & 0x0f));
            for (int l = 0; l < 4; l++, y += 8) {
                unsigned i1 = qs[2 * l] | ((unsigned)qh[ib] << (8 - 2 * l) & 256);
                unsigned i2 = qs[2 * l + 1] | ((unsigned)qh[ib] << (7 - 2 * l) & 256);
                signed_pair(db, em_iq3s_grid[i1], em_iq3s_grid[i2], signs[l], y);
            }
        }
    }
}

/* 8 values dl * (point[j] + delta), the coordinates signed bytes in {-1, 0, 1}. */
static void shifted_point(float dl, uint64_t point, float delta, float *y) {
    for (int j = 0; j < 8; j++) y[j] = dl * ((float)(int8_t)em_iq_grid_byte(point, j) + delta);
}

/* IQ1_S (50 bytes): f16 d, qs[32] (low 8 bits of indexes into em_iq1s_grid), u16 qh[8] (per
 * sub-block: 3 more bits per index, a 3-bit scale s in bits 12..14, the delta's sign in bit 15);
 * dl = d * (2s + 1), delta = +-0.125. */
void em_iq1_s_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 50, *qs = block + 2;
        float d = em_half_at(block), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            unsigned qh = u16_at(block + 34 + 2 * ib);
            float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++, y += 8)
                shifted_point(dl, em_iq1s_grid[qs[l] | ((qh >> (3 * l)) & 7) << 8], delta, y);
        }
    }
}

/* IQ1_M (56 bytes): qs[32] (low index bits), qh[16] (per pair of points: 3 more index bits and a
 * delta sign bit for each), scales[8] as four u16: 3-bit scales, two per sub-block (one per
 * half), and in the top nibbles of the four words the f16 d. dl = d * (2s + 1). */
void em_iq1_m_row(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *block = (const uint8_t *)src + b * 56, *qs = block, *qh = block + 32;
        unsigned sc[4];
        for (int i = 0; i < 4; i++) sc[i] = u16_at(block + 48 + 2 * i);
        unsigned dh =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        float d = em_f16_to_f32((uint16_t)dh), *y = dst + b * QK_K;
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
            unsigned shift = 6 * (ib % 2);
            float dl[2] = {d * (float)(2 * ((sc[ib / 2] >> shift) & 7) + 1),
                           d * (float)(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
            for (int l = 0; l < 4; l++, y += 8) {
                unsigned h = qh[l / 2] >> (4 * (l % 2)); /* this point's nibble of qh */
                float delta = h & 0x08 ? -IQ1_DELTA : IQ1_DELTA;
                shifted_point(dl[l / 2], em_iq1s_grid[qs[l] | (h & 7) << 8], delta, y);
            }
        }
    }
}
