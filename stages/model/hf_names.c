/* Hugging Face <-> GGUF tensor names and the Q/K row permutation (see hf_names.h). */
#include "stages/model/hf_names.h"

#include <stdio.h>
#include <string.h>

/* Per-layer names: HF suffix after "model.layers.N." and GGUF suffix after "blk.N.". */
static const char *const layer_names[][2] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

static const char *const global_names[][2] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The per-layer pair of `suffix` on side `from`: the architecture's own names first. */
static const char *const *layer_pair(const em_architecture *arch, const char *suffix, int from) {
    for (size_t i = 0; arch && arch->hf_layer_names && arch->hf_layer_names[i][0]; i++)
        if (strcmp(suffix, arch->hf_layer_names[i][from]) == 0) return arch->hf_layer_names[i];
    for (size_t i = 0; i < COUNT(layer_names); i++)
        if (strcmp(suffix, layer_names[i][from]) == 0) return layer_names[i];
    return NULL;
}

/* Maps between the two naming schemes: side 0 is HF, side 1 GGUF. */
static bool translate(const em_architecture *arch, const char *name, int from, char *out,
                      size_t size) {
    for (size_t i = 0; i < COUNT(global_names); i++)
        if (strcmp(name, global_names[i][from]) == 0) {
            snprintf(out, size, "%s", global_names[i][1 - from]);
            return true;
        }
    const char *prefix = from == 0 ? "model.layers." : "blk.";
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0) return false;
    const char *p = name + plen;
    int layer = 0, digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++) layer = layer * 10 + (*p - '0');
    if (digits == 0 || *p != '.') return false;
    const char *const *pair = layer_pair(arch, p + 1, from);
    if (!pair) return false;
    if (from == 0)
        snprintf(out, size, "blk.%d.%s", layer, pair[1]);
    else
        snprintf(out, size, "model.layers.%d.%s", layer, pair[0]);
    return true;
}

bool em_hf_to_gguf_name(const em_architecture *arch, const char *hf, char *out, size_t size) {
    return translate(arch, hf, 0, out, size);
}

bool em_gguf_to_hf_name(const em_architecture *arch, const char *gguf, char *out, size_t size) {
    return translate(arch, gguf, 1, out, size);
}

em_qk_kind em_gguf_name_qk_kind(const char *gguf) {
    const char *dot = strncmp(gguf, "blk.", 4) == 0 ? strchr(gguf + 4, '.') : NULL;
    if (!dot) return EM_QK_NONE;
    dot++;
    if (strcmp(dot, "attn_q.weight") == 0 || strcmp(dot, "attn_q.bias") == 0) return EM_QK_Q;
    if (strcmp(dot, "attn_k.weight") == 0 || strcmp(dot, "attn_k.bias") == 0) return EM_QK_K;
    if (strcmp(dot, "attn_q_norm.weight") == 0 || strcmp(dot, "attn_k_norm.weight") == 0)
        return EM_QK_NORM;
    return EM_QK_NONE;
}

void em_qk_permute(const void *src, void *dst, int64_t rows, size_t row_bytes, int n_heads,
                   bool to_gguf) {
    const char *in = src;
    char *out = dst;
    int64_t head_dim = rows / n_heads, half = head_dim / 2;
    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t j = 0; j < 2; j++) {
                int64_t gguf_row = h * head_dim + 2 * i + j;
                int64_t hf_row = h * head_dim + j * half + i;
                int64_t from = to_gguf ? hf_row : gguf_row, to = to_gguf ? gguf_row : hf_row;
                memcpy(out + to * row_bytes, in + from * row_bytes, row_bytes);
            }
}

void em_qk_rows_to_gguf(em_tensor *t, int heads, em_model_storage *storage) {
    int64_t rows = t->n_dims == 1 ? t->shape[0] : t->shape[1];
    void *copy = em_model_storage_keep(storage, em_xmalloc(t->nbytes ? t->nbytes : 1));
    em_qk_permute(t->data, copy, rows, t->nbytes / (size_t)rows, heads, true);
    t->data = copy;
}
