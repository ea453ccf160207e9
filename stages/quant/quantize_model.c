/* em_quantize_model (see quantize_model.h). */
#include "stages/quant/quantize_model.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/sha256.h"
#include "stages/kernels/cpu/dequantize.h"
#include "stages/formats/ggml_types.h"
#include "stages/model/model_storage.h"

#define CHUNK_ROWS 16 /* rows converted and quantized per task */

void em_quantize_rows(const em_ggml_type_info *s, const float *x, int64_t rows, int64_t n,
                      const float *qw, void *out) {
    size_t row_bytes = em_tensor_type_row_bytes(s->id, n);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *y = (uint8_t *)out + r * row_bytes;
        if (qw && s->from_float_imatrix)
            s->from_float_imatrix(x + r * n, n, qw, y);
        else
            s->from_float(x + r * n, n, y);
    }
}

static bool is_quantized(em_tensor_type type) {
    const em_ggml_type_info *info = em_ggml_type_info_get((uint32_t)type);
    return info && info->block_size > 1;
}

/* t's checks against scheme s (see quantize_model.h). */
static em_status check_tensor(const em_tensor *t, const em_ggml_type_info *s,
                              bool allow_requantize) {
    int64_t n = t->shape[0];
    if (n % s->block_size != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor %s: rows of %lld values are not a multiple of %s's block of %d "
                            "values",
                            t->name, (long long)n, s->scheme, s->block_size);
    if (is_quantized(t->type) && !allow_requantize)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor %s is already quantized (%s); quantizing it again to %s loses "
                            "more precision: set allow_requantize: true to do it anyway",
                            t->name, em_tensor_type_name(t->type), s->scheme);
    if (!em_ggml_type_supported((uint32_t)t->type))
        return em_error_new(EM_EXIT_BAD_INPUT, "tensor %s: cannot read %s values as floats",
                            t->name, em_tensor_type_name(t->type));
    return NULL;
}

/* Whether t is a linear weight of one of m's blocks. */
static bool is_block_linear(const em_model *m, const em_tensor *t) {
    for (int i = 0; i < m->config.n_layers; i++) {
        const em_layer_weights *l = &m->layers[i];
        if (t == l->wq || t == l->wk || t == l->wv || t == l->wo || t == l->w_gate ||
            t == l->w_up || t == l->w_down)
            return true;
    }
    return false;
}

/* The statistics' entry for t, checked (see quantize_model.h): *entry NULL when t may do without
 * one and has none. */
static em_status stats_entry(const em_model *m, const em_activation_stats *st, const em_tensor *t,
                             const em_activation_stat **entry) {
    *entry = em_activation_stats_find(st, t->name);
    bool required = is_block_linear(m, t);
    if (!*entry && required)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor %s: the calibration statistics have no entry for it (%zu "
                            "entries; were they collected on this model?)",
                            t->name, st->n);
    if (*entry && (*entry)->columns != t->shape[0])
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor %s: the calibration statistics have %lld columns, the "
                            "weight's rows %lld",
                            t->name, (long long)(*entry)->columns, (long long)t->shape[0]);
    if (*entry && (*entry)->count <= 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor %s: the calibration statistics saw no token through it",
                            t->name);
    return NULL;
}

/* qw[j] = sum_x2[j] / count: llama-quantize's importance of column j. */
static float *importance_weights(const em_activation_stat *e) {
    float *qw = em_xmalloc((size_t)e->columns * sizeof *qw);
    for (int64_t j = 0; j < e->columns; j++) qw[j] = (float)(e->sum_x2[j] / (double)e->count);
    return qw;
}

/* The blocks of t quantized with s (qw: importance weights or NULL), in a new buffer of *nbytes. */
static void *quantize_tensor(const em_tensor *t, const em_ggml_type_info *s, int threads,
                             const float *qw, size_t *nbytes) {
    int64_t n = t->shape[0], rows = em_tensor_numel(t) / n;
    size_t row_bytes = em_tensor_type_row_bytes(s->id, n);
    *nbytes = (size_t)rows * row_bytes;
    uint8_t *out = em_xmalloc(*nbytes ? *nbytes : 1);
    int64_t chunks = (rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
#pragma omp parallel num_threads(threads)
    {
        float *x = em_xmalloc((size_t)(CHUNK_ROWS * n) * sizeof *x);
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t r0 = c * CHUNK_ROWS;
            int64_t nr = rows - r0 < CHUNK_ROWS ? rows - r0 : CHUNK_ROWS;
            em_rows_to_float(t, r0, nr, x, n);
            em_quantize_rows(s, x, nr, n, qw, out + r0 * (int64_t)row_bytes);
        }
        free(x);
    }
    return out;
}

/* A checksum naming the source and the quantization, in place of the file header's. */
static void quantized_sha256(const em_model *src, const em_quantize_options *opt, char hex[65]) {
    char text[1024];
    const em_activation_stats *st = opt->stats;
    snprintf(text, sizeof text,
             "%s quantize %s embeddings=%d output=%d method=%d calibrated=%d tokens=%lld "
             "windows=%lld dataset=%s",
             src->header_sha256, opt->plan.scheme, opt->plan.embeddings, opt->plan.output,
             (int)opt->method, st != NULL, st ? (long long)st->tokens : 0LL,
             st ? (long long)st->windows : 0LL, st && st->dataset ? st->dataset : "");
    em_sha256_hex(text, strlen(text), hex);
}

/* The quantized model's digest: its source's, the plan, the method and the statistics' digest. */
static void quantized_digest(const em_model *src, const em_quantize_options *opt,
                             char hex[EM_DIGEST_HEX]) {
    char stats[EM_DIGEST_HEX] = "none";
    if (opt->stats) em_activation_stats_digest(opt->stats, stats);
    em_content_digest d;
    em_content_digest_init(&d);
    char *text = em_xasprintf("%s quantize %s embeddings=%d output=%d method=%d statistics=%s",
                              src->digest, opt->plan.scheme, opt->plan.embeddings, opt->plan.output,
                              (int)opt->method, stats);
    em_content_digest_update(&d, text, strlen(text) + 1);
    free(text);
    for (size_t i = 0; i < opt->plan.exclude_count; i++)
        em_content_digest_update(&d, opt->plan.exclude[i], strlen(opt->plan.exclude[i]) + 1);
    em_content_digest_final(&d, hex);
}

/* Quantizes t with s (from its current data, or from floats when given) and points t at the
 * blocks, which storage keeps. */
static void replace_with_blocks(em_model_storage *storage, em_tensor *t, const em_ggml_type_info *s,
                                int threads, const float *qw, em_quantize_summary *summary) {
    size_t nbytes;
    void *blocks = em_model_storage_keep(storage, quantize_tensor(t, s, threads, qw, &nbytes));
    summary->quantized++;
    summary->weighted += qw != NULL;
    summary->bytes_before += t->nbytes;
    summary->bytes_after += nbytes;
    t->type = s->id;
    t->data = blocks;
    t->nbytes = nbytes;
}

/* AWQ on layer l of m (awq.h): the rescaled weights are quantized from their floats (and marked
 * done), the folded norms replace the old ones. */
static em_status awq_layer(em_model *m, const em_quantize_options *opt, int l, int threads,
                           bool *done, em_quantize_summary *summary) {
    const em_layer_weights *L = &m->layers[l];
    const em_tensor *ws[EM_AWQ_WEIGHTS] = {L->wq, L->wk, L->wv, L->w_gate, L->w_up, L->w_down};
    em_awq_layer a;
    em_status err = em_awq_scale_layer(m, l, &opt->plan, opt->stats, -1.0f,
                                       opt->method == EM_QUANT_AWQ_IMATRIX, threads, &a);
    if (err) return err;
    em_model_storage *storage = m->impl;
    for (int i = 0; i < EM_AWQ_WEIGHTS; i++) {
        if (!a.w[i]) continue;
        em_tensor *t = &m->tensors[ws[i] - m->tensors];
        em_tensor view = *t; /* the rescaled weight as F32 rows */
        view.type = EM_TENSOR_F32;
        view.data = a.w[i];
        view.nbytes = (size_t)em_tensor_numel(t) * sizeof(float);
        const em_ggml_type_info *s = em_quant_plan_scheme_for(&opt->plan, m, t);
        size_t f32_bytes = view.nbytes;
        replace_with_blocks(storage, &view, s, threads, s->from_float_imatrix ? a.qw[i] : NULL,
                            summary);
        summary->bytes_before = summary->bytes_before - f32_bytes + t->nbytes;
        t->type = view.type;
        t->data = view.data;
        t->nbytes = view.nbytes;
        done[t - m->tensors] = true;
    }
    const em_tensor *norms[2] = {L->attn_norm, L->ffn_norm};
    float *folded[2] = {a.attn_norm, a.ffn_norm};
    for (int k = 0; k < 2; k++) {
        if (!folded[k]) continue;
        em_tensor *t = &m->tensors[norms[k] - m->tensors];
        t->data = em_model_storage_keep(storage, folded[k]);
        folded[k] = NULL;
    }
    a.attn_norm = a.ffn_norm = NULL;
    for (int g = 0; g < EM_AWQ_GROUPS; g++) {
        if (a.alpha[g] < 0) continue;
        summary->awq_groups++;
        summary->awq_alpha_sum += a.alpha[g];
        summary->awq_error += a.error[g];
        summary->awq_error_plain += a.error_plain[g];
    }
    em_awq_layer_free(&a);
    return NULL;
}

em_status em_quantize_check_stats(const em_model *src, const em_quantize_options *opt) {
    for (size_t i = 0; opt->stats && i < src->tensor_count; i++) {
        const em_tensor *t = &src->tensors[i];
        const em_activation_stat *e;
        em_status err = em_quant_plan_scheme_for(&opt->plan, src, t)
                            ? stats_entry(src, opt->stats, t, &e)
                            : NULL;
        if (err) return err;
    }
    return NULL;
}

em_status em_quantize_model(const em_model *src, const em_quantize_options *opt, em_model **out,
                            em_quantize_summary *summary) {
    *out = NULL;
    memset(summary, 0, sizeof *summary);
    if (!src->path)
        return em_error_new(EM_EXIT_BAD_INPUT, "the model to quantize was not loaded from a file");
    /* Checks first, so a bad tensor stops the stage before any work. */
    for (size_t i = 0; i < src->tensor_count; i++) {
        const em_tensor *t = &src->tensors[i];
        const em_ggml_type_info *s = em_quant_plan_scheme_for(&opt->plan, src, t);
        em_status err = s ? check_tensor(t, s, opt->allow_requantize) : NULL;
        if (err) return err;
        const em_ggml_type_info *wanted = em_quant_plan_wanted_for(&opt->plan, src, t);
        if (s != wanted)
            em_log_info("quantize: tensor %s: rows of %lld values are not a multiple of %s's block "
                        "of %d values: %s instead (llama-quantize's fallback)",
                        t->name, (long long)t->shape[0], wanted->scheme, wanted->block_size,
                        s->scheme);
    }
    em_status err = em_quantize_check_stats(src, opt);
    if (err) return err;
    if (opt->method != EM_QUANT_RTN && !opt->stats)
        return em_error_new(EM_EXIT_BAD_INPUT, "AWQ needs calibration statistics");
    em_model *m;
    err = em_model_load(src->path, &m);
    if (err) return err;
    if (strcmp(m->digest, src->digest) != 0) {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s changed on disk since it was loaded (its digest then %s, now %s)",
                           src->path, src->digest, m->digest);
        em_model_free(m);
        return err;
    }
    int threads = opt->threads > 0 ? opt->threads : omp_get_max_threads();
    em_model_storage *storage = m->impl;
    bool *done = em_xcalloc(m->tensor_count ? m->tensor_count : 1, sizeof *done);
    bool awq = opt->method == EM_QUANT_AWQ || opt->method == EM_QUANT_AWQ_IMATRIX;
    for (int l = 0; !err && awq && l < m->config.n_layers; l++)
        err = awq_layer(m, opt, l, threads, done, summary);
    for (size_t i = 0; !err && i < m->tensor_count; i++) {
        em_tensor *t = &m->tensors[i];
        const em_ggml_type_info *s = em_quant_plan_scheme_for(&opt->plan, m, t);
        if (!s || done[i]) continue;
        const em_activation_stat *e =
            opt->method != EM_QUANT_AWQ ? em_activation_stats_find(opt->stats, t->name) : NULL;
        float *qw = e && s->from_float_imatrix ? importance_weights(e) : NULL;
        replace_with_blocks(storage, t, s, threads, qw, summary);
        free(qw);
    }
    free(done);
    if (err) {
        em_model_free(m);
        return err;
    }
    quantized_sha256(src, opt, m->header_sha256);
    quantized_digest(src, opt, m->digest);
    *out = m;
    return NULL;
}
