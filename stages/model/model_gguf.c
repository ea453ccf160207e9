/* em_model from a GGUF file: hyperparameters from the `<arch>.*` keys with llama.cpp's defaults
 * for absent optional keys, tensors pointing into the mapping, the tokenizer from the
 * tokenizer.ggml.* keys, and the SHA-256 of everything before the tensor data.
 *
 * The architecture comes from the architecture table (architectures.h). llama.cpp writes the Q/K
 * rows of every architecture but llama in Hugging Face's order (it applies "NEOX" RoPE, which
 * rotates the two halves of each head); the binder permutes those rows into em_model's
 * adjacent-pair order, as owned copies, so every em_model uses one RoPE convention. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/sha256.h"
#include "stages/model/architectures.h"
#include "stages/formats/gguf.h"
#include "stages/model/llama_weights.h"
#include "stages/model/model_loaders.h"
#include "stages/model/model_storage.h"
#include "stages/model/rope_scaling.h"
#include "stages/tokenizer/tokenizer.h"

/* Reads `<arch>.<suffix>` as a positive int; `fallback` < 0 means the key is required. */
static em_status arch_int(const em_gguf *g, const char *arch, const char *suffix, int64_t fallback,
                          int *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint64_t v;
    bool found;
    em_status err = em_gguf_get_u64(g, key, &v, &found);
    if (err) return err;
    if (!found) {
        if (fallback < 0)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: missing metadata key %s", g->path, key);
        *out = (int)fallback;
        return NULL;
    }
    if (v == 0 || v > (1u << 30))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: metadata key %s is %llu (1 to 2^30 allowed)",
                            g->path, key, (unsigned long long)v);
    *out = (int)v;
    return NULL;
}

static em_status arch_float(const em_gguf *g, const char *arch, const char *suffix, double fallback,
                            float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    bool found;
    em_status err = em_gguf_get_f64(g, key, &v, &found);
    if (err) return err;
    *out = found ? (float)v : (float)fallback;
    return NULL;
}

/* A RoPE scaling parameter of config c's architecture: `<arch>.<gguf_key>`. */
typedef struct gguf_rope_source {
    const em_gguf *g;
    const char *arch;
} gguf_rope_source;

static em_status gguf_rope_number(const void *source, const char *gguf_key, const char *hf_key,
                                  double fallback, double *out) {
    (void)hf_key;
    const gguf_rope_source *s = source;
    *out = fallback;
    if (!gguf_key) return NULL;
    char key[128];
    snprintf(key, sizeof key, "%s.%s", s->arch, gguf_key);
    bool found;
    return em_gguf_get_f64(s->g, key, out, &found);
}

/* rope.scaling.type: a row of the scaling table (rope_scaling.h); without the key, linear when a
 * factor (rope.scaling.factor or the older rope.scale_linear) is there, as llama.cpp reads it. */
static em_status read_rope_scaling(const em_gguf *g, const char *arch, em_llama_config *c) {
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    em_gguf_string type = {0};
    bool found;
    em_status err = em_gguf_get_string(g, key, &type, &found);
    if (err) return err;
    float factor = 0;
    err = arch_float(g, arch, "rope.scaling.factor", 0, &factor);
    if (!err && factor == 0) err = arch_float(g, arch, "rope.scale_linear", 0, &factor);
    if (err) return err;
    const em_rope_scaling_kind *kind =
        found ? em_rope_scaling_find(type.data, type.len)
              : em_rope_scaling_of(factor > 0 ? EM_ROPE_SCALING_LINEAR : EM_ROPE_SCALING_NONE);
    if (!kind)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: %s is '%.*s'; supported: %s", g->path, key,
                            (int)(type.len > 64 ? 64 : type.len), type.data,
                            em_rope_scaling_names());
    gguf_rope_source source = {g, arch};
    em_rope_params params = {gguf_rope_number, &source, g->path};
    return kind->read(&params, factor, c);
}

/* The block's features from the architecture's row and its optional keys. */
static em_status read_features(const em_gguf *g, const em_architecture *row, em_llama_config *c) {
    const char *a = row->name;
    em_architecture_features(row, c);
    c->attn_scale_base =
        row->query_scale_dim_layers == c->n_layers ? c->dim / c->n_heads : c->head_dim;
    em_status err = NULL;
    if (row->attn_softcap_key)
        err = arch_float(g, a, row->attn_softcap_key, row->attn_softcap, &c->attn_softcap);
    if (!err && row->final_softcap_key)
        err = arch_float(g, a, row->final_softcap_key, row->final_softcap, &c->final_softcap);
    if (!err && row->swa_pattern)
        err = arch_int(g, a, "attention.sliding_window", 0, &c->sliding_window);
    if (!err && row->rope_freq_base_swa > 0)
        err =
            arch_float(g, a, "rope.freq_base_swa", row->rope_freq_base_swa, &c->rope_freq_base_swa);
    return err;
}

static em_status read_config(const em_gguf *g, em_llama_config *c) {
    em_gguf_string arch;
    bool found;
    em_status err = em_gguf_get_string(g, "general.architecture", &arch, &found);
    if (err) return err;
    if (!found)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: missing metadata key general.architecture",
                            g->path);
    if (arch.len >= sizeof c->architecture) arch.len = sizeof c->architecture - 1;
    memcpy(c->architecture, arch.data, arch.len);
    c->architecture[arch.len] = '\0';
    const char *a = c->architecture;
    const em_architecture *row = em_architecture_find(a);
    if (!row)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: unsupported architecture '%s' (supported: %s)",
                            g->path, a, em_architecture_names());
    err = arch_int(g, a, "context_length", -1, &c->n_ctx_train);
    if (!err) err = arch_int(g, a, "embedding_length", -1, &c->dim);
    if (!err) err = arch_int(g, a, "block_count", -1, &c->n_layers);
    if (!err) err = arch_int(g, a, "feed_forward_length", -1, &c->ffn_dim);
    if (!err) err = arch_int(g, a, "attention.head_count", -1, &c->n_heads);
    if (!err) err = arch_int(g, a, "attention.head_count_kv", c->n_heads, &c->n_kv_heads);
    if (err) return err;
    char key_length[128];
    snprintf(key_length, sizeof key_length, "%s.attention.key_length", a);
    if (c->dim % c->n_heads != 0 && !em_gguf_find(g, key_length))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: embedding length %d is not a multiple of the head count %d",
                            g->path, c->dim, c->n_heads);
    err = arch_int(g, a, "attention.key_length", c->dim / c->n_heads, &c->head_dim);
    if (!err) err = arch_int(g, a, "rope.dimension_count", c->head_dim, &c->rope_dim);
    if (!err) err = arch_float(g, a, "rope.freq_base", 10000.0, &c->rope_freq_base);
    if (!err) err = arch_float(g, a, "attention.layer_norm_rms_epsilon", 1e-5, &c->rms_eps);
    if (!err) err = read_rope_scaling(g, a, c);
    if (!err) err = read_features(g, row, c);
    return err;
}

/* <arch>.vocab_size, else the tokenizer's token count, else token_embd's second dimension. */
static em_status read_vocab(const em_gguf *g, em_llama_config *c) {
    char key[128];
    snprintf(key, sizeof key, "%s.vocab_size", c->architecture);
    if (em_gguf_find(g, key)) return arch_int(g, c->architecture, "vocab_size", -1, &c->n_vocab);
    const em_gguf_kv *tokens = em_gguf_find(g, "tokenizer.ggml.tokens");
    if (tokens && tokens->value.type == EM_GGUF_ARRAY && tokens->value.arr.count > 0 &&
        tokens->value.arr.count < (1u << 30)) {
        c->n_vocab = (int)tokens->value.arr.count;
        return NULL;
    }
    for (uint64_t i = 0; i < g->tensor_count; i++)
        if (strcmp(g->tensors[i].name, "token_embd.weight") == 0 && g->tensors[i].n_dims == 2 &&
            g->tensors[i].shape[1] < (1 << 30)) {
            c->n_vocab = (int)g->tensors[i].shape[1];
            return NULL;
        }
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "%s: cannot tell the vocabulary size (no %s, no tokenizer.ggml.tokens, "
                        "no token_embd.weight)",
                        g->path, key);
}

em_status em_model_read_gguf_config(const char *path, em_llama_config *out) {
    memset(out, 0, sizeof *out);
    em_gguf *g;
    em_status err = em_gguf_open(path, &g);
    if (err) return err;
    err = read_config(g, out);
    if (!err) err = read_vocab(g, out);
    if (!err) err = em_llama_config_check(out, path);
    em_gguf_close(g);
    return err;
}

em_status em_model_load_gguf(const char *path, bool in_memory, em_model **out) {
    *out = NULL;
    em_gguf *g;
    em_status err = em_gguf_open_with(path, in_memory, &g);
    if (err) return err;
    em_model_storage *storage = em_model_storage_new();
    storage->gguf = g;
    em_model *m = em_xcalloc(1, sizeof *m);
    m->path = em_xstrdup(path);
    m->format = em_xstrdup("gguf");
    m->impl = storage;
    m->impl_free = em_model_storage_free;
    m->file_size = g->map_size;
    em_sha256_hex(g->map, g->data_offset < g->map_size ? g->data_offset : g->map_size,
                  m->header_sha256);
    em_content_digest_hex(g->map, g->map_size, m->digest);
    m->tensor_count = g->tensor_count;
    m->tensors = em_xcalloc(g->tensor_count, sizeof *m->tensors);
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        const em_gguf_tensor_info *ti = &g->tensors[i];
        em_tensor *t = &m->tensors[i];
        t->name = ti->name;
        t->type = (em_tensor_type)ti->type;
        t->n_dims = (int)ti->n_dims;
        memcpy(t->shape, ti->shape, sizeof t->shape);
        t->data = ti->data;
        t->nbytes = ti->nbytes;
    }
    err = read_config(g, &m->config);
    if (!err) err = read_vocab(g, &m->config);
    if (!err) err = em_llama_config_check(&m->config, path);
    if (!err)
        err = em_llama_bind(m, storage, em_architecture_find(m->config.architecture)->gguf_neox);
    if (!err && em_gguf_find(g, "tokenizer.ggml.model"))
        err = em_tokenizer_from_gguf(g, &m->tokenizer);
    if (err) {
        em_model_free(m);
        return err;
    }
    *out = m;
    return NULL;
}
