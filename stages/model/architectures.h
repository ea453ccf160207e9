/* The architecture table: one row per model architecture evalmesh runs, all of them decoders of
 * the Llama family (RMSNorm, RoPE, grouped-query attention, gated MLP) that differ in a few
 * features. A row names the architecture as GGUF (general.architecture) and Hugging Face
 * (config.json model_type and architectures) call it, the keys of its own hyperparameters, the
 * tensors it has beyond Llama's and the features of its block. The loaders fill em_llama_config
 * from the row (model_gguf.c, hf_checkpoint.c), the binder picks the tensors by it
 * (llama_weights.c), and the forwards apply the config's features. An architecture that has no
 * row is refused with the list of those that have one. */
#ifndef EVALMESH_ARCHITECTURES_H
#define EVALMESH_ARCHITECTURES_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/model/loaded_model.h"

typedef struct em_architecture {
    const char *name;             /* GGUF general.architecture, and em_llama_config.architecture */
    const char *hf_model_types;   /* config.json model_type values, space-separated */
    const char *hf_architectures; /* config.json architectures[0] values, space-separated */
    bool gguf_neox;  /* GGUF keeps Q/K rows in HF's rotate-half order (llama.cpp's NEOX RoPE) */
    bool qkv_bias;   /* Q, K, V biases always (otherwise when blk.0.attn_q.bias is present) */
    bool qk_norm;    /* blk.N.attn_q_norm, attn_k_norm {head_dim}: RMSNorm per head before RoPE */
    bool post_norms; /* blk.N.attn_post_norm, ffn_post_norm {dim} on the block's two outputs */
    bool fused_qkv;  /* blk.N.attn_qkv {dim, q + 2 kv} in place of attn_q, attn_k, attn_v (when
                      * the file has it: llama.cpp takes either) */
    bool fused_gate_up;  /* blk.N.ffn_up {dim, 2 ffn}: gate rows then up rows, no ffn_gate */
    bool hf_norm_offset; /* HF RMSNorm weights are w with the norm scaling by 1 + w (GGUF: 1 + w
                          * stored, as llama.cpp's converter writes it) */
    bool embed_scale;    /* the embedding rows are multiplied by sqrt(dim) */
    em_activation activation;
    /* Soft-capping: the GGUF key suffixes (NULL: none) and llama.cpp's defaults for absent keys */
    const char *attn_softcap_key, *final_softcap_key;
    float attn_softcap, final_softcap;
    /* Sliding window: 0 none; else the layer pattern (em_llama_config.swa_pattern), applied when
     * the file gives a window (GGUF <arch>.attention.sliding_window, HF sliding_window) */
    int swa_pattern;
    float rope_freq_base_swa;   /* the sliding layers' RoPE base when the file has none, or 0 */
    int query_scale_dim_layers; /* GGUF: with this many layers the score scale is
                                 * 1/sqrt(dim/heads) (llama.cpp's rule for Gemma 2/3 27B), 0 none */
    /* HF config.json keys of the features above (NULL: the architecture has no such key) */
    const char *hf_query_scalar_key, *hf_swa_pattern_key, *hf_rope_swa_key;
    const char *hf_attn_softcap_key, *hf_final_softcap_key;
    /* HF <-> GGUF per-layer tensor names that differ from Llama's (hf_names.h): pairs of
     * {HF suffix after "model.layers.N.", GGUF suffix after "blk.N."}, NULL-terminated */
    const char *const (*hf_layer_names)[2];
} em_architecture;

/* The row of a GGUF architecture name, or NULL. */
const em_architecture *em_architecture_find(const char *name);
/* The row whose HF model_type (or, when model_type is NULL, architectures[0]) is `hf`, or NULL. */
const em_architecture *em_architecture_find_hf(const char *model_type, const char *hf_class);
/* Sets c's architecture name and block features from the row (c->dim and head_dim read already):
 * the flags, embed_scale, attn_scale_base = head_dim, no soft-capping, no window; the loaders
 * then read the features' keys. */
void em_architecture_features(const em_architecture *row, em_llama_config *c);
/* The GGUF names of every row, ", "-separated, for messages. */
const char *em_architecture_names(void);
/* Every HF model_type of every row, ", "-separated, for messages. */
const char *em_architecture_hf_names(void);

#endif
