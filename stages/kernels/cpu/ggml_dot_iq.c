/* The lattice IQ types' and the ternary types' blocks decoded to integers for precision ggml (see
 * ggml_dot_iq.h). */
#include "stages/kernels/cpu/ggml_dot_iq.h"

#include "stages/formats/dequantize_rows.h"
#include "stages/formats/half.h"
#include "stages/formats/iq_grids.h"

static uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned u16_at(const uint8_t *p) {
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

/* 8 values at w: the point's coordinates (unsigned bytes) negated where bit j of signs is set,
 * times the scale. */
static void signed_point(uint64_t point, unsigned signs, int scale, int16_t *w) {
    for (int j = 0; j < 8; j++)
        w[j] = (int16_t)(em_iq_grid_byte(point, j) * ((signs >> j) & 1 ? -scale : scale));
}

/* The same from two 4-coordinate points (IQ3). */
static void signed_pair(uint32_t p1, uint32_t p2, unsigned signs, int scale, int16_t *w) {
    signed_point((uint64_t)p1 | (uint64_t)p2 << 32, signs, scale, w);
}

/* IQ1: 8 signed coordinates times the scale, and the scale times the delta's sign. */
static void shifted_point(uint64_t point, bool negative_delta, int scale, int16_t *w,
                          int16_t *delta) {
    for (int j = 0; j < 8; j++) {
        w[j] = (int16_t)((int8_t)em_iq_grid_byte(point, j) * scale);
        delta[j] = (int16_t)(negative_delta ? -scale : scale);
    }
}

int em_iq_block_bytes(em_ggml_dot_type type) {
    switch (type) {
    case EM_GGML_DOT_IQ2_XXS:
        return 66;
    case EM_GGML_DOT_IQ2_XS:
        return 74;
    case EM_GGML_DOT_IQ2_S:
        return 82;
    case EM_GGML_DOT_IQ3_XXS:
        return 98;
    case EM_GGML_DOT_IQ3_S:
        return 110;
    case EM_GGML_DOT_IQ1_S:
        return 50;
    case EM_GGML_DOT_TQ1_0:
        return 54;
    case EM_GGML_DOT_TQ2_0:
        return 66;
    default:
        return 56; /* IQ1_M */
    }
}

float em_iq_block_scale(em_ggml_dot_type type, const uint8_t *blk) {
    if (type == EM_GGML_DOT_TQ1_0 || type == EM_GGML_DOT_TQ2_0)
        return em_half_at(blk + em_iq_block_bytes(type) - 2);
    if (type != EM_GGML_DOT_IQ1_M) return em_half_at(blk);
    unsigned sc[4];
    for (int i = 0; i < 4; i++) sc[i] = u16_at(blk + 48 + 2 * i);
    return em_f16_to_f32((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                    ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
}

void em_iq_decode(em_ggml_dot_type type, const uint8_t *blk, em_iq_decoded *out) {
    if (type == EM_GGML_DOT_TQ1_0 || type == EM_GGML_DOT_TQ2_0) {
        int8_t v[256];
        (type == EM_GGML_DOT_TQ1_0 ? em_tq1_0_values : em_tq2_0_values)(blk, v);
        for (int j = 0; j < 256; j++) out->w[j] = v[j];
        return;
    }
    for (int ib = 0; ib < 8; ib++) { /* sub-block ib: values 32 ib .. 32 ib + 31 */
        int16_t *w = out->w + 32 * ib, *delta = out->delta + 32 * ib;
        switch (type) {
        case EM_GGML_DOT_IQ2_XXS: { /* 4 grid indexes, then signs and scale in a word */
            const uint8_t *sub = blk + 2 + 8 * ib;
            uint32_t aux = u32_at(sub + 4);
            for (int l = 0; l < 4; l++)
                signed_point(em_iq2xxs_grid[sub[l]], em_iq_signs((aux >> (7 * l)) & 127),
                             (int)(2 * (aux >> 28) + 1), w + 8 * l);
            break;
        }
        case EM_GGML_DOT_IQ2_XS: /* 9-bit index and 7-bit signs per point; a scale per half */
            for (int l = 0; l < 4; l++) {
                unsigned q = u16_at(blk + 2 + 2 * (4 * ib + l));
                signed_point(em_iq2xs_grid[q & 511], em_iq_signs(q >> 9),
                             2 * ((blk[66 + ib] >> (4 * (l / 2))) & 15) + 1, w + 8 * l);
            }
            break;
        case EM_GGML_DOT_IQ2_S: /* qs, signs, qh, scales */
            for (int l = 0; l < 4; l++) {
                unsigned index =
                    blk[2 + 4 * ib + l] | ((unsigned)blk[66 + ib] << (8 - 2 * l) & 0x300);
                signed_point(em_iq2s_grid[index], blk[34 + 4 * ib + l],
                             2 * ((blk[74 + ib] >> (4 * (l / 2))) & 15) + 1, w + 8 * l);
            }
            break;
        case EM_GGML_DOT_IQ3_XXS: { /* two points per 8 values; signs and scale as IQ2_XXS */
            const uint8_t *qs = blk + 2 + 8 * ib;
            uint32_t aux = u32_at(blk + 66 + 4 * ib);
            for (int l = 0; l < 4; l++)
                signed_pair(em_iq3xxs_grid[qs[2 * l]], em_iq3xxs_grid[qs[2 * l + 1]],
                            em_iq_signs((aux >> (7 * l)) & 127), (int)(2 * (aux >> 28) + 1),
                            w + 8 * l);
            break;
        }
        case EM_GGML_DOT_IQ3_S: { /* qs, qh (ninth index bits), signs, 4-bit scales */
            const uint8_t *qs = blk + 2 + 8 * ib, qh = blk[66 + ib];
            int scale = 2 * ((blk[106 + ib / 2] >> (4 * (ib % 2))) & 15) + 1;
            for (int l = 0; l < 4; l++) {
                unsigned i1 = qs[2 * l] | ((unsigned)qh << (8 - 2 * l) & 256);
                unsigned i2 = qs[2 * l + 1] | ((unsigned)qh << (7 - 2 * l) & 256);
                signed_pair(em_iq3s_grid[i1], em_iq3s_grid[i2], blk[74 + 4 * ib + l], scale,
                            w + 8 * l);
            }
            break;
        }
        case EM_GGML_DOT_IQ1_S: { /* qs; per sub-block 3 index bits per point, scale, delta */
            unsigned qh = u16_at(blk + 34 + 2 * ib);
            for (int l = 0; l < 4; l++)
                shifted_point(em_iq1s_grid[blk[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7) << 8],
                              qh & 0x8000, (int)(2 * ((qh >> 12) & 7) + 1), w + 8 * l,
                              delta + 8 * l);
            break;
        }
        default: { /* IQ1_M: qs, qh (index bits and delta sign per point), scales per half */
            unsigned sc = u16_at(blk + 48 + 2 * (ib / 2)), shift = 6 * (ib % 2);
            for (int l = 0; l < 4; l++) {
                unsigned h = blk[32 + 2 * ib + l / 2] >> (4 * (l % 2));
                shifted_point(em_iq1s_grid[blk[4 * ib + l] | (h & 7) << 8], h & 0x08,
                              (int)(2 * ((sc >> (shift + 3 * (l / 2))) & 7) + 1), w + 8 * l,
                              delta + 8 * l);
            }
        }
        }
    }
}
