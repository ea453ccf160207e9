/* The in-memory description of a Llama-family model, the same whichever file it came from
 * (GGUF or safetensors). Tensors point into the mmapped file when their bytes can be used as
 * they are, and into buffers owned by the model when they had to be converted.
 *
 * Layout conventions (those of GGUF/ggml):
 *   - shape[0] is the innermost (contiguous) dimension: a weight matrix W used as y = W x with
 *     x of length n_in and y of length n_out has shape {n_in, n_out}: n_out rows of n_in values.
 *   - Q and K projection rows are in the GGUF order: RoPE rotates adjacent pairs (x[2i], x[2i+1])
 *     of each head. The safetensors reader permutes Hugging Face's rows into this order.
 *   - Quantized types store blocks of values along shape[0], in ggml's layouts: block sizes,
 *     bytes and conversion to floats are in the tensor-type table (ggml_types.h).
 *   - 1-D tensors (norms, biases) are always F32: the loaders convert F16/BF16 ones. */
#ifndef EVALMESH_LOADED_MODEL_H
#define EVALMESH_LOADED_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/formats/ggml_types.h"
#include "util/content_digest.h"
#include "util/error.h"

typedef struct em_tensor {
    const char *name;
    em_tensor_type type;
    int n_dims;
    int64_t shape[4]; /* shape[0] innermost; unused dims are 1 */
    const void *data; /* into the mapped file or an owned buffer */
    size_t nbytes;
} em_tensor;

int64_t em_tensor_numel(const em_tensor *t);

typedef enum em_rope_scaling {
    EM_ROPE_SCALING_NONE,
    EM_ROPE_SCALING_LINEAR, /* positions multiplied by freq_scale */
    EM_ROPE_SCALING_LLAMA3, /* Llama 3.1 frequency smoothing */
    EM_ROPE_SCALING_YARN,   /* YaRN ramp between interpolated and kept frequencies */
} em_rope_scaling;

/* The gated MLP's activation: silu(gate) * up (SwiGLU) or gelu_tanh(gate) * up (GeGLU). */
typedef enum em_activation {
    EM_ACTIVATION_SILU,
    EM_ACTIVATION_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} em_activation;

typedef struct em_llama_config {
    char architecture[32]; /* a row of the architecture table (architectures.h) */
    int n_vocab;
    int dim;      /* embedding length */
    int n_layers; /* block count */
    int ffn_dim;  /* feed-forward length */
    int n_heads;
    int n_kv_heads;
    int head_dim;    /* dim / n_heads unless the file says otherwise */
    int rope_dim;    /* rotated dims per head (default head_dim) */
    int n_ctx_train; /* context length */
    float rope_freq_base;
    em_rope_scaling rope_scaling;
    float rope_freq_scale;    /* LINEAR, YARN: 1 / factor */
    float rope_llama3_factor; /* LLAMA3: factor, low/high frequency factors, old context */
    float rope_llama3_low_freq_factor;
    float rope_llama3_high_freq_factor;
    int rope_llama3_original_ctx;
    int rope_yarn_original_ctx; /* YARN: the original context, the ramp's betas, its share */
    float rope_yarn_beta_fast;
    float rope_yarn_beta_slow;
    float rope_yarn_ext_factor;
    float rope_attn_factor; /* YARN: cos and sin are multiplied by it (1 otherwise) */
    float rms_eps;
    bool has_qkv_bias;
    bool tied_output; /* no output tensor: the token embedding is the output head */
    /* The block's features, set by the architecture's row and the file's keys (llama: all off,
     * embed_scale 1, attn_scale_base head_dim). */
    bool qk_norm;    /* RMSNorm of each q and k head (attn_q_norm, attn_k_norm) before RoPE */
    bool post_norms; /* RMSNorm of the attention and MLP outputs before the residual adds */
    em_activation activation; /* of the gated MLP */
    float embed_scale;        /* the token embedding rows are multiplied by it (gemma: sqrt(dim)) */
    int attn_scale_base;      /* scores are q.k / sqrt(attn_scale_base) (query_pre_attn_scalar) */
    float attn_softcap;       /* > 0: scores become cap * tanh(score / cap) before the mask */
    float final_softcap;      /* > 0: logits become cap * tanh(logit / cap) */
    int sliding_window;       /* > 0: a sliding layer's query i sees keys j with i - j < window */
    int swa_pattern;          /* 1: every layer slides; n > 1: layer l slides iff l % n < n - 1 */
    float rope_freq_base_swa; /* > 0: the sliding layers' RoPE base, without scaling (gemma3) */
} em_llama_config;

/* Whether layer l of c attends through the sliding window. */
bool em_layer_is_sliding(const em_llama_config *c, int layer);

typedef struct em_layer_weights {
    const em_tensor *attn_norm; /* {dim} */
    const em_tensor *wq, *wk, *wv,
        *wo; /* {dim, n_heads*head_dim}, {dim, n_kv*head_dim} x2, {n_heads*head_dim, dim} */
    const em_tensor *bq, *bk, *bv;                   /* biases or NULL */
    const em_tensor *ffn_norm;                       /* {dim} */
    const em_tensor *w_gate, *w_up, *w_down;         /* {dim, ffn}, {dim, ffn}, {ffn, dim} */
    const em_tensor *q_norm, *k_norm;                /* {head_dim} with qk_norm, else NULL */
    const em_tensor *attn_post_norm, *ffn_post_norm; /* {dim} with post_norms, else NULL */
} em_layer_weights;

struct em_tokenizer;

typedef struct em_model {
    char *path;   /* the file (or directory) it was loaded from */
    char *format; /* "gguf" or "safetensors" */
    em_llama_config config;
    em_tensor *tensors; /* every tensor in the file(s) */
    size_t tensor_count;
    const em_tensor *tok_embd;      /* {dim, n_vocab} */
    const em_tensor *output_norm;   /* {dim} */
    const em_tensor *output;        /* {dim, n_vocab}; == tok_embd when tied */
    em_layer_weights *layers;       /* n_layers */
    struct em_tokenizer *tokenizer; /* NULL when the file has none; freed with the model */
    char header_sha256[65]; /* checksum of the file header (GGUF: up to tensor data; st: JSON) */
    /* what identifies the model (content_digest.h): every byte it was loaded from, tensor data
     * included (GGUF: the file; Hugging Face: config.json, every shard, the tokenizer file); a
     * quantized model: its source's, the scheme and the statistics' */
    char digest[EM_DIGEST_HEX];
    uint64_t file_size; /* bytes on disk, all shards */
    void *impl;         /* the reader's mappings and owned buffers */
    void (*impl_free)(void *impl);
    /* {rope_dim/2} F32 divisors of the RoPE frequencies, or NULL: llama.cpp's Llama 3.1 GGUF
     * files carry the llama3 scaling as this tensor (rope_freqs.weight) instead of
     * rope.scaling.* keys; theta_i = pos * freq_base^(-2i/rope_dim) / rope_freqs[i]. */
    const em_tensor *rope_freqs;
} em_model;

/* Opens a GGUF file, a .safetensors file or a directory holding a Hugging Face checkpoint
 * (config.json, model.safetensors or model.safetensors.index.json, tokenizer.json). */
em_status em_model_load(const char *path, em_model **out);
/* em_model_load; with in_memory the weights are read into memory of this process's own in 2 MiB
 * pages instead of mapped (the model stage's `mmap: false`, llama.cpp's --no-mmap; see
 * util/mapped_file.h): faster where reading the weights bounds the speed, but ranks on one node
 * no longer share one copy in the page cache. */
em_status em_model_load_with(const char *path, bool in_memory, em_model **out);
/* The configuration em_model_load reads from the GGUF file at path, from its metadata alone (no
 * tensor bound, no tokenizer built): what a stage checks before any model is loaded. */
em_status em_model_read_gguf_config(const char *path, em_llama_config *out);
void em_model_free(em_model *model);
const em_tensor *em_model_find_tensor(const em_model *model, const char *name);

#endif
