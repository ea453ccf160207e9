/* The RoPE scaling table (see rope_scaling.h). */
#include "stages/model/rope_scaling.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* none: the frequencies as the base gives them. */
static em_status read_none(const em_rope_params *p, double factor, em_llama_config *c) {
    (void)p, (void)factor;
    c->rope_scaling = EM_ROPE_SCALING_NONE;
    c->rope_freq_scale = 1.0f;
    return NULL;
}

static double freq_unchanged(const em_llama_config *c, int i, double f) {
    (void)c, (void)i;
    return f;
}

static int params_none(const em_llama_config *c, const char **names, double *values) {
    (void)c, (void)names, (void)values;
    return 0;
}

/* linear: positions divided by the factor (every frequency times 1 / factor); a factor of 0 (no
 * key) or 1 is no scaling, as llama.cpp reads it. */
static em_status read_linear(const em_rope_params *p, double factor, em_llama_config *c) {
    if (factor < 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: linear RoPE scaling factor %g must be positive",
                            p->where, factor);
    if (factor == 0 || factor == 1) return read_none(p, factor, c);
    c->rope_scaling = EM_ROPE_SCALING_LINEAR;
    c->rope_freq_scale = (float)(1.0 / factor);
    return NULL;
}

static double freq_linear(const em_llama_config *c, int i, double f) {
    (void)i;
    return f * c->rope_freq_scale;
}

static int params_linear(const em_llama_config *c, const char **names, double *values) {
    names[0] = "freq_scale";
    values[0] = c->rope_freq_scale;
    return 1;
}

/* llama3: Llama 3.1's smoothing between interpolated long and kept short wavelengths, with
 * llama.cpp's and transformers' defaults for absent keys. */
static em_status read_llama3(const em_rope_params *p, double factor, em_llama_config *c) {
    double low, high, ctx;
    em_status err =
        p->number(p->source, "rope.scaling.low_freq_factor", "low_freq_factor", 1.0, &low);
    if (!err)
        err = p->number(p->source, "rope.scaling.high_freq_factor", "high_freq_factor", 4.0, &high);
    if (!err)
        err = p->number(p->source, "rope.scaling.original_context_length",
                        "original_max_position_embeddings", 8192, &ctx);
    if (err) return err;
    if (!(high > low))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: llama3 RoPE scaling needs high_freq_factor (%g) > "
                            "low_freq_factor (%g)",
                            p->where, high, low);
    if (!(ctx >= 1 && ctx <= (double)(1 << 30)))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: llama3 RoPE scaling's original context %g is not 1 to 2^30",
                            p->where, ctx);
    c->rope_scaling = EM_ROPE_SCALING_LLAMA3;
    c->rope_freq_scale = 1.0f;
    c->rope_llama3_factor = factor > 0 ? (float)factor : 8.0f;
    c->rope_llama3_low_freq_factor = (float)low;
    c->rope_llama3_high_freq_factor = (float)high;
    c->rope_llama3_original_ctx = (int)ctx;
    return NULL;
}

static double freq_llama3(const em_llama_config *c, int i, double f) {
    (void)i;
    double factor = c->rope_llama3_factor;
    double low = c->rope_llama3_low_freq_factor, high = c->rope_llama3_high_freq_factor;
    double old_ctx = c->rope_llama3_original_ctx;
    double wavelen = 2.0 * M_PI / f;
    if (wavelen > old_ctx / low) return f / factor;
    if (wavelen < old_ctx / high) return f;
    double smooth = (old_ctx / wavelen - low) / (high - low);
    return (1.0 - smooth) * f / factor + smooth * f;
}

static int params_llama3(const em_llama_config *c, const char **names, double *values) {
    names[0] = "llama3_factor", values[0] = c->rope_llama3_factor;
    names[1] = "llama3_low_freq_factor", values[1] = c->rope_llama3_low_freq_factor;
    names[2] = "llama3_high_freq_factor", values[2] = c->rope_llama3_high_freq_factor;
    names[3] = "llama3_original_context", values[3] = c->rope_llama3_original_ctx;
    return 4;
}

/* yarn (YaRN, arXiv 2309.00071): per pair a ramp between the interpolated frequency f / factor
 * and the kept f, decided by how many rotations the pair makes over the original context (beta
 * fast and slow), and cos and sin scaled by the attention temperature 1 + 0.1 ln(factor). The
 * parameters as llama.cpp reads GGUF keys (yarn_ext_factor scales the ramp, yarn_attn_factor
 * the temperature) and as transformers reads rope_scaling (attention_factor replaces the
 * temperature; mscale and mscale_all_dim make it a ratio, DeepSeek's way). */
static double yarn_temperature(double factor, double mscale) {
    return factor <= 1 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

static em_status read_yarn(const em_rope_params *p, double factor, em_llama_config *c) {
    double ctx, fast, slow, ext, attn, given, mscale, mscale_all;
    em_status err = p->number(p->source, "rope.scaling.original_context_length",
                              "original_max_position_embeddings", c->n_ctx_train, &ctx);
    if (!err) err = p->number(p->source, "rope.scaling.yarn_beta_fast", "beta_fast", 32, &fast);
    if (!err) err = p->number(p->source, "rope.scaling.yarn_beta_slow", "beta_slow", 1, &slow);
    if (!err) err = p->number(p->source, "rope.scaling.yarn_ext_factor", NULL, 1, &ext);
    if (!err) err = p->number(p->source, "rope.scaling.yarn_attn_factor", NULL, 1, &attn);
    if (!err) err = p->number(p->source, NULL, "attention_factor", NAN, &given);
    if (!err) err = p->number(p->source, NULL, "mscale", 0, &mscale);
    if (!err) err = p->number(p->source, NULL, "mscale_all_dim", 0, &mscale_all);
    if (err) return err;
    if (!(factor > 0))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: yarn RoPE scaling needs a positive factor",
                            p->where);
    if (!(ctx >= 1 && ctx <= (double)(1 << 30)) || !(fast > 0) || !(slow > 0))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: yarn RoPE scaling needs an original context of 1 to 2^30 (%g) "
                            "and positive beta_fast (%g) and beta_slow (%g)",
                            p->where, ctx, fast, slow);
    if (ext < 0) ext = 1; /* llama.cpp: a negative yarn_ext_factor means the default */
    double temperature = !isnan(given)          ? given
                         : mscale && mscale_all ? yarn_temperature(factor, mscale) /
                                                      yarn_temperature(factor, mscale_all)
                         : ext != 0 ? yarn_temperature(factor, 1)
                                    : 1.0;
    c->rope_scaling = EM_ROPE_SCALING_YARN;
    c->rope_freq_scale = (float)(1.0 / factor);
    c->rope_yarn_original_ctx = (int)ctx;
    c->rope_yarn_beta_fast = (float)fast;
    c->rope_yarn_beta_slow = (float)slow;
    c->rope_yarn_ext_factor = (float)ext;
    c->rope_attn_factor = (float)(attn * temperature);
    return NULL;
}

/* The (fractional) pair whose frequency turns `rotations` times over the original context. */
static double yarn_pair(const em_llama_config *c, double rotations) {
    return c->rope_dim * log(c->rope_yarn_original_ctx / (rotations * 2 * M_PI)) /
           (2 * log(c->rope_freq_base));
}

static double freq_yarn(const em_llama_config *c, int i, double f) {
    double low = fmax(0, floor(yarn_pair(c, c->rope_yarn_beta_fast)));
    double high = fmin(c->rope_dim - 1, ceil(yarn_pair(c, c->rope_yarn_beta_slow)));
    double ramp = (i - low) / fmax(0.001, high - low);
    double keep = (1 - fmin(1, fmax(0, ramp))) * c->rope_yarn_ext_factor; /* share of f kept */
    return f * c->rope_freq_scale * (1 - keep) + f * keep;
}

static double magnitude_yarn(const em_llama_config *c) {
    return c->rope_attn_factor;
}

static int params_yarn(const em_llama_config *c, const char **names, double *values) {
    names[0] = "freq_scale", values[0] = c->rope_freq_scale;
    names[1] = "yarn_original_context", values[1] = c->rope_yarn_original_ctx;
    names[2] = "yarn_beta_fast", values[2] = c->rope_yarn_beta_fast;
    names[3] = "yarn_beta_slow", values[3] = c->rope_yarn_beta_slow;
    names[4] = "yarn_ext_factor", values[4] = c->rope_yarn_ext_factor;
    names[5] = "attn_factor", values[5] = c->rope_attn_factor;
    return 6;
}

static const em_rope_scaling_kind kinds[] = {
    {EM_ROPE_SCALING_NONE, "none", read_none, freq_unchanged, NULL, params_none},
    {EM_ROPE_SCALING_LINEAR, "linear", read_linear, freq_linear, NULL, params_linear},
    {EM_ROPE_SCALING_LLAMA3, "llama3", read_llama3, freq_llama3, NULL, params_llama3},
    {EM_ROPE_SCALING_YARN, "yarn", read_yarn, freq_yarn, magnitude_yarn, params_yarn},
};

const em_rope_scaling_kind *em_rope_scaling_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strlen(kinds[i].name) == len && memcmp(kinds[i].name, name, len) == 0) return &kinds[i];
    return NULL;
}

const em_rope_scaling_kind *em_rope_scaling_of(em_rope_scaling id) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].id == id) return &kinds[i];
    return &kinds[0];
}

const char *em_rope_scaling_names(void) {
    static char names[64];
    if (!names[0])
        for (size_t i = 0, used = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                     kinds[i].name);
    return names;
}
