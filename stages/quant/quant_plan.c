/* Tensor selection and llama-quantize's K-quant mixes (see quant_plan.h). */
#include "stages/quant/quant_plan.h"

#include <string.h>

#include "stages/quant/type_fallback.h"

typedef struct mix {
    const char *name;
    const char *base; /* the scheme of tensors no rule bumps */
    int ftype;        /* llama_ftype (llama.h): LLAMA_FTYPE_MOSTLY_Q4_K_M, ..._Q5_K_M */
} mix;

static const mix mixes[] = {
    {"Q4_K_M", "Q4_K", 15},
    {"Q5_K_M", "Q5_K", 17},
};

static const mix *find_mix(const char *name) {
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (strcmp(mixes[i].name, name) == 0) return &mixes[i];
    return NULL;
}

bool em_quant_plan_scheme_known(const char *name) {
    return em_ggml_type_by_scheme(name) || find_mix(name);
}

int em_quant_plan_ftype(const char *name) {
    const mix *mx = find_mix(name);
    if (mx) return mx->ftype;
    const em_ggml_type_info *type = em_ggml_type_by_scheme(name);
    return type ? type->ftype : -1;
}

static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
           (i_layer - n_layers / 8) % 3 == 2;
}

/* The layer whose linear weight t is (role: 'v' attn_v, 'd' ffn_down, 'o' any other), or -1. */
static int linear_layer(const em_model *m, const em_tensor *t, char *role) {
    for (int i = 0; i < m->config.n_layers; i++) {
        const em_layer_weights *l = &m->layers[i];
        *role = t == l->wv ? 'v' : t == l->w_down ? 'd' : 'o';
        if (t == l->wq || t == l->wk || t == l->wv || t == l->wo || t == l->w_gate ||
            t == l->w_up || t == l->w_down)
            return i;
    }
    return -1;
}

const em_ggml_type_info *em_quant_plan_wanted_for(const em_quant_plan *plan, const em_model *m,
                                                  const em_tensor *t) {
    char role = 'o';
    int layer = linear_layer(m, t, &role);
    bool is_head = t == m->output && !m->config.tied_output;
    bool is_embd = t == m->tok_embd;
    bool embd_chosen = is_embd && (plan->embeddings || (plan->output && m->config.tied_output));
    if (layer < 0 && !(is_head && plan->output) && !embd_chosen) return NULL;
    for (size_t i = 0; i < plan->exclude_count; i++)
        if (strcmp(plan->exclude[i], t->name) == 0) return NULL;
    const mix *mx = find_mix(plan->scheme);
    if (!mx) return em_ggml_type_by_scheme(plan->scheme);

    const char *name = mx->base;
    if (is_head || (is_embd && m->config.tied_output)) {
        name = t->shape[0] % 256 != 0 ? "Q8_0" : "Q6_K";
    } else if ((role == 'v' || role == 'd') && layer >= 0 &&
               use_more_bits(layer, m->config.n_layers)) {
        name = "Q6_K";
    }
    return em_ggml_type_by_scheme(name);
}

const em_ggml_type_info *em_quant_plan_scheme_for(const em_quant_plan *plan, const em_model *m,
                                                  const em_tensor *t) {
    const em_ggml_type_info *wanted = em_quant_plan_wanted_for(plan, m, t);
    const em_ggml_type_info *used =
        wanted && !plan->strict ? em_quant_type_fallback(wanted, t->shape[0]) : NULL;
    return used ? used : wanted;
}
