/* RoPE frequencies, tables and the rotation (see rope.h). */
#include "stages/kernels/cpu/rope.h"

#include <math.h>

#include "stages/kernels/cpu/scratch.h"
#include "stages/model/rope_scaling.h"

void em_rope_freqs(const em_llama_config *c, const float *factors, double *freqs) {
    const em_rope_scaling_kind *kind = em_rope_scaling_of(c->rope_scaling);
    int half = c->rope_dim / 2;
    for (int i = 0; i < half; i++) {
        double f = kind->freq(c, i, pow((double)c->rope_freq_base, -2.0 * i / c->rope_dim));
        if (factors) f /= factors[i];
        freqs[i] = f;
    }
}

double em_rope_magnitude(const em_llama_config *c) {
    const em_rope_scaling_kind *kind = em_rope_scaling_of(c->rope_scaling);
    return kind->magnitude ? kind->magnitude(c) : 1.0;
}

em_llama_config em_rope_config_swa(const em_llama_config *c) {
    em_llama_config local = *c;
    local.rope_freq_base = c->rope_freq_base_swa;
    local.rope_scaling = EM_ROPE_SCALING_NONE;
    return local;
}

void em_rope_table(const em_llama_config *c, const float *factors, const int32_t *positions, int T,
                   float *cos_sin) {
    int half = c->rope_dim / 2;
    double freqs[half];
    em_rope_freqs(c, factors, freqs);
    double magnitude = em_rope_magnitude(c);
    for (int t = 0; t < T; t++) {
        int p = positions ? positions[t] : t;
        for (int i = 0; i < half; i++) {
            double angle = p * freqs[i];
            cos_sin[((size_t)t * half + i) * 2] = (float)(cos(angle) * magnitude);
            cos_sin[((size_t)t * half + i) * 2 + 1] = (float)(sin(angle) * magnitude);
        }
    }
}

void em_rope_apply(float *x, int T, int ld, int n_heads, int head_dim, int rope_dim,
                   const float *cos_sin, int threads) {
    int half = rope_dim / 2;
#pragma omp parallel for num_threads(threads) if ((int64_t)T * n_heads * rope_dim >=               \
                                                  EM_PARALLEL_MIN_ELEMENTS)
    for (int t = 0; t < T; t++) {
        const float *cs = cos_sin + (size_t)t * half * 2;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)t * ld + (size_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                float c = cs[2 * i], s = cs[2 * i + 1];
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c - b * s;
                v[2 * i + 1] = a * s + b * c;
            }
        }
    }
}
