/* The types whose blocks of 256 values the `ggml` precision (ggml_dot.h) decodes to integers for
 * their dot products with the Q8_K form of the activations, as ggml_vec_dot_<type>_q8_K_generic
 * computes them: the lattice IQ types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M (per
 * block the exact integer sum of each value's grid coordinate, with its sign, times its odd
 * sub-block scale 2 s + 1 times the activation, and for IQ1_S and IQ1_M also the exact sum of each
 * value's scale times its delta's sign, +1 or -1, times the activation) and the ternary TQ1_0 and
 * TQ2_0 (the exact sum of each value, -1, 0 or 1, times the activation); then the block's float
 * step and, after the last block, the type's factor (em_iq_step, em_iq_factor). The bit layouts
 * are those of the dequantizers (stages/formats/dequantize_iq.c, dequantize_ternary.c). */
#ifndef EVALMESH_KERNELS_GGML_DOT_IQ_H
#define EVALMESH_KERNELS_GGML_DOT_IQ_H

#include <stdbool.h>
#include <stdint.h>

#include "stages/kernels/cpu/ggml_dot.h"

/* A block decoded: value j's coordinate times its scale, and (IQ1) its scale times its delta's
 * sign; both below 2^11 in magnitude. */
typedef struct em_iq_decoded {
    int16_t w[256], delta[256];
} em_iq_decoded;

/* Whether the column is one of these types. */
static inline bool em_ggml_dot_is_decoded(int column) {
    return column >= EM_GGML_DOT_IQ2_XXS && column <= EM_GGML_DOT_TQ2_0;
}

/* Whether its blocks have the IQ1 delta term. */
static inline bool em_iq_has_delta(em_ggml_dot_type type) {
    return type == EM_GGML_DOT_IQ1_S || type == EM_GGML_DOT_IQ1_M;
}

/* Bytes per block. */
int em_iq_block_bytes(em_ggml_dot_type type);
/* The block's fp16 scale d as a float (IQ1_M's spread over its scale words' top nibbles, the
 * ternary types' at the block's end). */
float em_iq_block_scale(em_ggml_dot_type type, const uint8_t *blk);
/* The block's integers (delta left untouched without the IQ1 term). */
void em_iq_decode(em_ggml_dot_type type, const uint8_t *blk, em_iq_decoded *out);

/* The block's float step from sumf, with d = em_iq_block_scale, dy the activations' Q8_K scale,
 * sum and delta_sum the block's exact sums: sumf + (d * dy) * sum, and for IQ1_S and IQ1_M
 * sumf + (d * dy) * (sum + 0.125 * delta_sum) (IQ1S_DELTA, IQ1M_DELTA). */
static inline float em_iq_step(em_ggml_dot_type type, float sumf, float d, float dy, int32_t sum,
                               int32_t delta_sum) {
    if (em_iq_has_delta(type)) return sumf + (d * dy) * ((float)sum + 0.125f * (float)delta_sum);
    return sumf + (d * dy) * (float)sum;
}

/* The type's factor after the last block: 0.125 for IQ2_XXS, IQ2_XS and IQ2_S, 0.25 for IQ3_XXS,
 * none (1, exact) for the others. */
static inline float em_iq_factor(em_ggml_dot_type type) {
    switch (type) {
    case EM_GGML_DOT_IQ2_XXS:
    case EM_GGML_DOT_IQ2_XS:
    case EM_GGML_DOT_IQ2_S:
        return 0.125f;
    case EM_GGML_DOT_IQ3_XXS:
        return 0.25f;
    default:
        return 1.0f;
    }
}

#endif
