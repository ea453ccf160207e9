/* Tensor-parallel weight shards (see llama_shard.h). */
#include "stages/kernels/llama_shard.h"

#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/vocab_head.h"
#include "stages/formats/ggml_types.h"

/* Rows [row0, row0 + rows) of t, in place. */
static em_tensor row_view(const em_tensor *t, int64_t row0, int64_t rows) {
    size_t row_bytes = em_tensor_type_row_bytes(t->type, t->shape[0]);
    em_tensor v = *t;
    v.shape[1] = rows;
    v.data = (const char *)t->data + (size_t)row0 * row_bytes;
    v.nbytes = (size_t)rows * row_bytes;
    return v;
}

/* Columns [col0, col0 + cols) of every row of t, copied into owned memory (*owned). */
static em_status column_copy(const em_tensor *t, int64_t col0, int64_t cols, em_tensor *out) {
    int block = em_ggml_type_info_get((uint32_t)t->type)->block_size;
    if (col0 % block != 0 || cols % block != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor '%s' (%s, blocks of %d values) cannot be split at column %lld "
                            "into slices of %lld columns",
                            t->name, em_tensor_type_name(t->type), block, (long long)col0,
                            (long long)cols);
    size_t row_bytes = em_tensor_type_row_bytes(t->type, t->shape[0]);
    size_t skip = em_tensor_type_row_bytes(t->type, col0);
    size_t keep = em_tensor_type_row_bytes(t->type, cols);
    char *dst = em_xmalloc(keep * (size_t)t->shape[1]);
    for (int64_t r = 0; r < t->shape[1]; r++)
        memcpy(dst + (size_t)r * keep, (const char *)t->data + (size_t)r * row_bytes + skip, keep);
    *out = *t;
    out->shape[0] = cols;
    out->data = dst;
    out->nbytes = keep * (size_t)t->shape[1];
    return NULL;
}

/* The slice [i0, i0 + n) of a bias vector, as floats. */
static float *bias_slice(const em_tensor *t, int64_t i0, int64_t n) {
    em_tensor row = *t;
    row.shape[1] = 1;
    float *all = em_xmalloc((size_t)t->shape[0] * sizeof *all);
    em_rows_to_float(&row, 0, 1, all, t->shape[0]);
    memmove(all, all + i0, (size_t)n * sizeof *all);
    return all;
}

static em_status divisible(const char *what, int n, int tp) {
    if (n % tp == 0) return NULL;
    return em_error_new(EM_EXIT_BAD_INPUT, "tp = %d does not divide the model's %d %s", tp, n,
                        what);
}

em_status em_llama_shard_new(const em_model *m, int tp, int rank, em_llama_shard *out) {
    memset(out, 0, sizeof *out);
    const em_llama_config *c = &m->config;
    em_status err = divisible("attention heads", c->n_heads, tp);
    if (!err) err = divisible("KV heads", c->n_kv_heads, tp);
    if (!err) err = divisible("MLP columns (ffn)", c->ffn_dim, tp);
    if (err) return err;
    out->tp = tp;
    out->rank = rank;
    out->n_heads = c->n_heads / tp;
    out->n_kv_heads = c->n_kv_heads / tp;
    out->ffn_dim = c->ffn_dim / tp;
    int64_t hd = c->head_dim, q0 = (int64_t)rank * out->n_heads * hd, qn = out->n_heads * hd;
    int64_t kv0 = (int64_t)rank * out->n_kv_heads * hd, kvn = out->n_kv_heads * hd;
    int64_t f0 = (int64_t)rank * out->ffn_dim, fn = out->ffn_dim;
    out->layers = em_xcalloc((size_t)c->n_layers, sizeof *out->layers);
    size_t bytes = 0;
    for (int l = 0; l < c->n_layers && !err; l++) {
        const em_layer_weights *w = &m->layers[l];
        em_llama_shard_layer *s = &out->layers[l];
        s->wq = row_view(w->wq, q0, qn);
        s->wk = row_view(w->wk, kv0, kvn);
        s->wv = row_view(w->wv, kv0, kvn);
        s->w_gate = row_view(w->w_gate, f0, fn);
        s->w_up = row_view(w->w_up, f0, fn);
        if (tp == 1) {
            s->wo = *w->wo;
            s->w_down = *w->w_down;
        } else {
            err = column_copy(w->wo, q0, qn, &s->wo);
            if (!err) err = column_copy(w->w_down, f0, fn, &s->w_down);
            if (err) err = em_error_prefix(err, "layer %d", l);
        }
        if (c->has_qkv_bias) {
            s->bq = bias_slice(w->bq, q0, qn);
            s->bk = bias_slice(w->bk, kv0, kvn);
            s->bv = bias_slice(w->bv, kv0, kvn);
        }
        bytes += s->wq.nbytes + s->wk.nbytes + s->wv.nbytes + s->wo.nbytes + s->w_gate.nbytes +
                 s->w_up.nbytes + s->w_down.nbytes + w->attn_norm->nbytes + w->ffn_norm->nbytes;
    }
    em_vocab_shard(c->n_vocab, tp, rank, &out->vocab_row0, &out->vocab_rows);
    out->output = row_view(m->output, out->vocab_row0, out->vocab_rows);
    bytes += em_tensor_type_row_bytes(m->output->type, c->dim) * (size_t)out->vocab_rows;
    out->weight_bytes = bytes + m->output_norm->nbytes;
    if (err) em_llama_shard_free(out, c->n_layers);
    return err;
}

void em_llama_shard_free(em_llama_shard *shard, int n_layers) {
    for (int l = 0; shard->layers && l < n_layers; l++) {
        em_llama_shard_layer *s = &shard->layers[l];
        if (shard->tp > 1) {
            free((void *)s->wo.data);
            free((void *)s->w_down.data);
        }
        free(s->bq);
        free(s->bk);
        free(s->bv);
    }
    free(shard->layers);
    memset(shard, 0, sizeof *shard);
}
