/* Rotary position embedding as GGUF orders Q and K rows: within each head, adjacent pairs
 * (x[2i], x[2i+1]) for i < rope_dim/2 are rotated by the angle pos * freq_i, with
 * freq_i = base^(-2i/rope_dim) adjusted by the model's scaling:
 * (the kinds are rows of stages/model/rope_scaling.h):
 *   - linear: pos * freq_scale;
 *   - Llama 3: wavelengths longer than original_ctx/low_freq_factor are divided by factor,
 *     shorter than original_ctx/high_freq_factor kept, and in between blended smoothly;
 *   - YaRN: per pair a ramp between freq_i / factor and freq_i, and cos and sin multiplied by
 *     the attention temperature (em_rope_magnitude);
 *   - per-frequency factors (the rope_freqs.weight tensor llama.cpp writes for Llama 3.1
 *     models instead of scaling keys): freq_i / factors[i].
 * Angles, cosines and sines are computed in double, then rounded to float. */
#ifndef EVALMESH_KERNELS_ROPE_H
#define EVALMESH_KERNELS_ROPE_H

#include <stdint.h>

#include "stages/model/loaded_model.h"

/* The frequencies (rope_dim/2) of config c, scaling applied; factors is (rope_dim/2) or NULL. */
void em_rope_freqs(const em_llama_config *c, const float *factors, double *freqs);

/* The factor c's scaling multiplies cos and sin by (1 but for YaRN). */
double em_rope_magnitude(const em_llama_config *c);

/* The config of the sliding layers' RoPE when the model gives them a base of their own
 * (rope_freq_base_swa > 0, Gemma 3): that base, no scaling (and no rope_freqs factors). */
em_llama_config em_rope_config_swa(const em_llama_config *c);

/* cos_sin is (T, rope_dim/2, 2): cos and sin of the angle at positions[0..T-1] (0..T-1 when
 * positions is NULL; a context-parallel rank holds blocks from the middle of a window). */
void em_rope_table(const em_llama_config *c, const float *factors, const int32_t *positions, int T,
                   float *cos_sin);

/* x is (T, n_heads * head_dim) with row stride ld: rotates each head in place. */
void em_rope_apply(float *x, int T, int ld, int n_heads, int head_dim, int rope_dim,
                   const float *cos_sin, int threads);

#endif
