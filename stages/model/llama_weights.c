/* The Llama tensor layout, checked against the config (see llama_weights.h). */
#include "stages/model/llama_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/model/architectures.h"
#include "stages/formats/ggml_types.h"
#include "stages/formats/half.h"
#include "stages/model/hf_names.h"

em_status em_llama_config_check(const em_llama_config *c, const char *path) {
    struct {
        const char *what;
        int value;
    } positive[] = {{"vocabulary size", c->n_vocab}, {"embedding length", c->dim},
                    {"block count", c->n_layers},    {"feed-forward length", c->ffn_dim},
                    {"head count", c->n_heads},      {"KV head count", c->n_kv_heads},
                    {"head dimension", c->head_dim}, {"context length", c->n_ctx_train}};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (positive[i].value <= 0)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: the %s is %d; it must be positive", path,
                                positive[i].what, positive[i].value);
    if (c->n_heads % c->n_kv_heads != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: head count %d is not a multiple of the KV head count %d", path,
                            c->n_heads, c->n_kv_heads);
    if (c->rope_dim <= 0 || c->rope_dim > c->head_dim || c->rope_dim % 2 != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: RoPE dimension count %d must be even and between 2 and the head "
                            "dimension %d",
                            path, c->rope_dim, c->head_dim);
    if (!(c->rms_eps > 0) || !(c->rope_freq_base > 0))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: RMS epsilon (%g) and RoPE frequency base (%g) must be positive",
                            path, c->rms_eps, c->rope_freq_base);
    return NULL;
}

static void shape_text(const int64_t *shape, int n_dims, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "{");
    for (int d = 0; d < n_dims && used < size; d++)
        used +=
            (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (used < size) snprintf(buf + used, size - used, "}");
}

/* The same shape, ignoring trailing dimensions of 1. */
static bool same_shape(const em_tensor *t, const int64_t *want, int n_want) {
    for (int d = 0; d < 4; d++) {
        int64_t w = d < n_want ? want[d] : 1;
        int64_t have = d < t->n_dims ? t->shape[d] : 1;
        if (w != have) return false;
    }
    return true;
}

/* Turns an F16/BF16 1-D tensor into an owned F32 copy. */
static void to_f32(em_tensor *t, em_model_storage *storage) {
    int64_t n = em_tensor_numel(t);
    float *out = em_model_storage_keep(storage, em_xmalloc((size_t)n * sizeof(float)));
    const uint16_t *in = t->data;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, &in[i], 2);
        out[i] = t->type == EM_TENSOR_F16 ? em_f16_to_f32(h) : em_bf16_to_f32(h);
    }
    t->type = EM_TENSOR_F32;
    t->data = out;
    t->nbytes = (size_t)n * sizeof(float);
}

/* Finds a required (or, when optional, possibly absent) tensor and checks its type and shape. */
static em_status need(em_model *m, em_model_storage *storage, const char *name, int n_dims,
                      int64_t d0, int64_t d1, bool optional, const em_tensor **out) {
    *out = NULL;
    em_tensor *t = (em_tensor *)em_model_find_tensor(m, name);
    if (!t) {
        if (optional) return NULL;
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: missing tensor %s", m->path, name);
    }
    if (!em_ggml_type_supported((uint32_t)t->type))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: unsupported tensor type %s in tensor %s (supported: %s)", m->path,
                            em_tensor_type_name(t->type), name, em_ggml_supported_names());
    int64_t want[2] = {d0, d1};
    if (!same_shape(t, want, n_dims)) {
        char have_text[96], want_text[96];
        shape_text(t->shape, t->n_dims, have_text, sizeof have_text);
        shape_text(want, n_dims, want_text, sizeof want_text);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor %s has shape %s but the config needs %s",
                            m->path, name, have_text, want_text);
    }
    if (n_dims == 1 && t->type != EM_TENSOR_F32) {
        if (t->type != EM_TENSOR_F16 && t->type != EM_TENSOR_BF16)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: tensor %s has type %s; norms and biases must be F32, F16 "
                                "or BF16",
                                m->path, name, em_tensor_type_name(t->type));
        to_f32(t, storage);
    }
    *out = t;
    return NULL;
}

/* Rows [row0, row0 + rows) of a fused tensor as a tensor of its own, named `name` (GGUF terms:
 * the part's name in an unfused file), reading the same bytes. */
static const em_tensor *fused_part(em_model_storage *storage, const em_tensor *t, const char *name,
                                   int64_t row0, int64_t rows) {
    size_t row_bytes = em_tensor_type_row_bytes(t->type, t->shape[0]);
    em_tensor *v = em_model_storage_keep(storage, em_xmalloc(sizeof *v));
    *v = *t;
    v->name = em_model_storage_keep(storage, em_xstrdup(name));
    v->shape[1] = rows;
    v->data = (const char *)t->data + (size_t)row0 * row_bytes;
    v->nbytes = (size_t)rows * row_bytes;
    return v;
}

/* Q/K projections, their biases and their per-head norm weights from rotate-half rows to
 * adjacent pairs (hf_names.h), as owned copies (the tensor table's entries, or the views of a
 * fused tensor, point at them). */
static void permute_qk(em_model_storage *storage, const em_llama_config *c, em_layer_weights *w) {
    const em_tensor *const *qk[] = {&w->wq, &w->wk, &w->bq, &w->bk, &w->q_norm, &w->k_norm};
    int heads[] = {c->n_heads, c->n_kv_heads, c->n_heads, c->n_kv_heads, 1, 1};
    for (size_t i = 0; i < sizeof qk / sizeof qk[0]; i++)
        if (*qk[i]) em_qk_rows_to_gguf((em_tensor *)*qk[i], heads[i], storage);
}

em_status em_llama_bind(em_model *m, em_model_storage *storage, bool permute) {
    em_llama_config *c = &m->config;
    const em_architecture *row = em_architecture_find(c->architecture);
    int64_t dim = c->dim, q_dim = (int64_t)c->n_heads * c->head_dim;
    int64_t kv_dim = (int64_t)c->n_kv_heads * c->head_dim, ffn = c->ffn_dim, vocab = c->n_vocab;
    em_status err = need(m, storage, "token_embd.weight", 2, dim, vocab, false, &m->tok_embd);
    if (!err) err = need(m, storage, "output_norm.weight", 1, dim, 1, false, &m->output_norm);
    if (!err) err = need(m, storage, "output.weight", 2, dim, vocab, true, &m->output);
    if (err) return err;
    if (!err)
        err = need(m, storage, "rope_freqs.weight", 1, c->rope_dim / 2, 1, true, &m->rope_freqs);
    if (err) return err;
    c->tied_output = m->output == NULL;
    if (c->tied_output) m->output = m->tok_embd;
    if (em_model_find_tensor(m, "blk.0.attn_q.bias")) c->has_qkv_bias = true;
    m->layers = em_xcalloc((size_t)c->n_layers, sizeof *m->layers);
    bool split_ffn = row->fused_gate_up;
    if (em_model_find_tensor(m, "rope_factors_long.weight"))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: rope_factors_long.weight: LongRoPE scaling (Phi-3 128k) is not "
                            "supported",
                            m->path);
    for (int l = 0; l < c->n_layers && !err; l++) {
        em_layer_weights *w = &m->layers[l];
        char fused_name[64]; /* llama.cpp reads a Phi-3's Q, K, V fused or apart */
        snprintf(fused_name, sizeof fused_name, "blk.%d.attn_qkv.weight", l);
        bool split_qkv = row->fused_qkv && em_model_find_tensor(m, fused_name);
        const em_tensor *qkv = NULL, *gate_up = NULL;
        struct {
            const char *suffix;
            int n_dims;
            int64_t d0, d1;
            bool optional, absent; /* absent: not a tensor of this architecture */
            const em_tensor **slot;
        } parts[] = {
            {"attn_norm.weight", 1, dim, 1, false, false, &w->attn_norm},
            {"attn_qkv.weight", 2, dim, q_dim + 2 * kv_dim, false, !split_qkv, &qkv},
            {"attn_q.weight", 2, dim, q_dim, false, split_qkv, &w->wq},
            {"attn_k.weight", 2, dim, kv_dim, false, split_qkv, &w->wk},
            {"attn_v.weight", 2, dim, kv_dim, false, split_qkv, &w->wv},
            {"attn_output.weight", 2, q_dim, dim, false, false, &w->wo},
            {"attn_q.bias", 1, q_dim, 1, !c->has_qkv_bias, false, &w->bq},
            {"attn_k.bias", 1, kv_dim, 1, !c->has_qkv_bias, false, &w->bk},
            {"attn_v.bias", 1, kv_dim, 1, !c->has_qkv_bias, false, &w->bv},
            {"attn_q_norm.weight", 1, c->head_dim, 1, false, !c->qk_norm, &w->q_norm},
            {"attn_k_norm.weight", 1, c->head_dim, 1, false, !c->qk_norm, &w->k_norm},
            {"attn_post_norm.weight", 1, dim, 1, false, !c->post_norms, &w->attn_post_norm},
            {"ffn_norm.weight", 1, dim, 1, false, false, &w->ffn_norm},
            {"ffn_gate.weight", 2, dim, ffn, false, split_ffn, &w->w_gate},
            {"ffn_up.weight", 2, dim, ffn, false, split_ffn, &w->w_up},
            {"ffn_up.weight", 2, dim, 2 * ffn, false, !split_ffn, &gate_up},
            {"ffn_down.weight", 2, ffn, dim, false, false, &w->w_down},
            {"ffn_post_norm.weight", 1, dim, 1, false, !c->post_norms, &w->ffn_post_norm},
        };
        for (size_t i = 0; i < sizeof parts / sizeof parts[0] && !err; i++) {
            if (parts[i].absent) continue;
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, parts[i].suffix);
            err = need(m, storage, name, parts[i].n_dims, parts[i].d0, parts[i].d1,
                       parts[i].optional, parts[i].slot);
        }
        if (err) break;
        char name[64];
        if (qkv) {
            const struct {
                const char *suffix;
                int64_t row0, rows;
                const em_tensor **slot;
            } split[] = {{"attn_q.weight", 0, q_dim, &w->wq},
                         {"attn_k.weight", q_dim, kv_dim, &w->wk},
                         {"attn_v.weight", q_dim + kv_dim, kv_dim, &w->wv}};
            for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "blk.%d.%s", l, split[i].suffix);
                *split[i].slot = fused_part(storage, qkv, name, split[i].row0, split[i].rows);
            }
        }
        if (gate_up) {
            snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", l);
            w->w_gate = fused_part(storage, gate_up, name, 0, ffn);
            snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
            w->w_up = fused_part(storage, gate_up, name, ffn, ffn);
        }
        if (permute) permute_qk(storage, c, w);
    }
    return err;
}

/* t (F32, {n}) as an owned copy holding 1 + t. */
static const em_tensor *plus_one(em_model_storage *storage, const em_tensor *t) {
    int64_t n = em_tensor_numel(t);
    float *v = em_model_storage_keep(storage, em_xmalloc((size_t)n * sizeof *v));
    memcpy(v, t->data, (size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] += 1.0f;
    ((em_tensor *)t)->data = v;
    return t;
}

void em_llama_norm_offset(em_model *m, em_model_storage *storage) {
    plus_one(storage, m->output_norm);
    for (int l = 0; l < m->config.n_layers; l++) {
        em_layer_weights *w = &m->layers[l];
        const em_tensor *norms[] = {w->attn_norm, w->ffn_norm,       w->q_norm,
                                    w->k_norm,    w->attn_post_norm, w->ffn_post_norm};
        for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
            if (norms[i]) plus_one(storage, norms[i]);
    }
}
