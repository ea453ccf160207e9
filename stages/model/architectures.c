/* The architecture table's rows (see architectures.h). Sources: llama.cpp's src/llama-arch.cpp
 * (tensor names), src/llama-model.cpp (hyperparameter keys and defaults) and its graphs, and the
 * modeling_*.py of Hugging Face transformers (gemma, gemma2, gemma3, qwen3, phi3). */
#include "stages/model/architectures.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Gemma 2 and 3 have four norms per layer: HF's post_attention_layernorm is the attention's
 * post-norm, pre_feedforward_layernorm the MLP's input norm. */
static const char *const gemma2_layer_names[][2] = {
    {"post_attention_layernorm.weight", "attn_post_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "ffn_post_norm.weight"},
    {NULL, NULL},
};

/* Phi-3 fuses Q, K, V into one projection and gate and up into another (llama.cpp keeps the
 * fused gate/up under ffn_up). */
static const char *const phi3_layer_names[][2] = {
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},
    {NULL, NULL},
};

static const em_architecture rows[] = {
    {.name = "llama",
     .hf_model_types = "llama mistral",
     .hf_architectures = "LlamaForCausalLM MistralForCausalLM",
     .swa_pattern = 1},
    {.name = "qwen2",
     .hf_model_types = "qwen2",
     .hf_architectures = "Qwen2ForCausalLM",
     .gguf_neox = true,
     .qkv_bias = true},
    {.name = "qwen3",
     .hf_model_types = "qwen3",
     .hf_architectures = "Qwen3ForCausalLM",
     .gguf_neox = true,
     .qk_norm = true},
    {.name = "gemma",
     .hf_model_types = "gemma",
     .hf_architectures = "GemmaForCausalLM",
     .gguf_neox = true,
     .hf_norm_offset = true,
     .embed_scale = true,
     .activation = EM_ACTIVATION_GELU_TANH},
    {.name = "gemma2",
     .hf_model_types = "gemma2",
     .hf_architectures = "Gemma2ForCausalLM",
     .gguf_neox = true,
     .post_norms = true,
     .hf_norm_offset = true,
     .embed_scale = true,
     .activation = EM_ACTIVATION_GELU_TANH,
     .attn_softcap_key = "attn_logit_softcapping",
     .final_softcap_key = "final_logit_softcapping",
     .attn_softcap = 50.0f,
     .final_softcap = 30.0f,
     .swa_pattern = 2,
     .query_scale_dim_layers = 46,
     .hf_query_scalar_key = "query_pre_attn_scalar",
     .hf_attn_softcap_key = "attn_logit_softcapping",
     .hf_final_softcap_key = "final_logit_softcapping",
     .hf_layer_names = gemma2_layer_names},
    {.name = "gemma3",
     .hf_model_types = "gemma3_text",
     .hf_architectures = "Gemma3ForCausalLM",
     .gguf_neox = true,
     .qk_norm = true,
     .post_norms = true,
     .hf_norm_offset = true,
     .embed_scale = true,
     .activation = EM_ACTIVATION_GELU_TANH,
     .swa_pattern = 6,
     .rope_freq_base_swa = 10000.0f,
     .query_scale_dim_layers = 62,
     .hf_query_scalar_key = "query_pre_attn_scalar",
     .hf_swa_pattern_key = "sliding_window_pattern",
     .hf_rope_swa_key = "rope_local_base_freq",
     .hf_attn_softcap_key = "attn_logit_softcapping",
     .hf_final_softcap_key = "final_logit_softcapping",
     .hf_layer_names = gemma2_layer_names},
    {.name = "phi3",
     .hf_model_types = "phi3",
     .hf_architectures = "Phi3ForCausalLM",
     .gguf_neox = true,
     .fused_qkv = true,
     .fused_gate_up = true,
     .swa_pattern = 1,
     .hf_layer_names = phi3_layer_names},
};

#define ROW_COUNT (sizeof rows / sizeof rows[0])

/* Whether `word` is one of the space-separated words of `list`. */
static bool in_list(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && n > 0 && strncmp(p, word, n) == 0) return true;
        p += len;
        while (*p == ' ') p++;
    }
    return false;
}

const em_architecture *em_architecture_find(const char *name) {
    for (size_t i = 0; i < ROW_COUNT; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

const em_architecture *em_architecture_find_hf(const char *model_type, const char *hf_class) {
    for (size_t i = 0; i < ROW_COUNT; i++) {
        if (model_type ? in_list(rows[i].hf_model_types, model_type)
                       : hf_class && in_list(rows[i].hf_architectures, hf_class))
            return &rows[i];
    }
    return NULL;
}

/* The rows' names (hf: their HF model_types), joined by ", ", in a per-thread buffer. */
static const char *joined(bool hf) {
    static _Thread_local char buffers[2][512];
    char *out = buffers[hf];
    size_t used = 0;
    for (size_t i = 0; i < ROW_COUNT; i++) {
        const char *list = hf ? rows[i].hf_model_types : rows[i].name;
        for (const char *p = list; *p;) {
            size_t len = strcspn(p, " ");
            used += (size_t)snprintf(out + used, sizeof buffers[0] - used, "%s%.*s",
                                     used ? ", " : "", (int)len, p);
            p += len;
            while (*p == ' ') p++;
        }
    }
    return out;
}

const char *em_architecture_names(void) {
    return joined(false);
}

const char *em_architecture_hf_names(void) {
    return joined(true);
}

void em_architecture_features(const em_architecture *row, em_llama_config *c) {
    snprintf(c->architecture, sizeof c->architecture, "%s", row->name);
    c->has_qkv_bias = c->has_qkv_bias || row->qkv_bias;
    c->qk_norm = row->qk_norm;
    c->post_norms = row->post_norms;
    c->activation = row->activation;
    c->embed_scale = row->embed_scale ? sqrtf((float)c->dim) : 1.0f;
    c->attn_scale_base = c->head_dim;
    c->attn_softcap = c->final_softcap = 0;
    c->sliding_window = 0;
    c->swa_pattern = row->swa_pattern;
    c->rope_freq_base_swa = 0;
}
