/* em_quantize_model (see quantize_model.h). */
#include "stages/quant/quantize_model.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sha256.h"
#include "stages/kernels/cpu/dequantize.h"
#include "stages/model/ggml_types.h"
#include "stages/model/model_storage.h"

#define CHUNK_ROWS 16 /* rows converted and quantized per task */

void em_quantize_rows(const em_quant_scheme *s, const float *x, int64_t rows, int64_t n,
                      const float *qw, void *out) {
    size_t row_bytes = em_quant_row_bytes(s, n);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *y = (uint8_t *)out + r * row_bytes;
        if (qw && s->quantize_row_imatrix)
            s->quantize_row_imatrix(x + r * n, n, qw, y);
        else
            s->quantize_row(x + r * n, n, y);
    }
}

static bool is_quantized(em_tensor_type type) {
    const em_ggml_type_info *info = em_ggml_type_info_get((uint32_t)type);
    return info && info->block_size > 1;
}

/* t's checks against scheme s (see quantize_model.h). */
static em_status check_tensor(const em_tensor *t, const em_quant_scheme *s, bool allow_requantize) {
    int64_t n = t->shape[0];
    if (n % s->block_values != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor %s: rows of %lld values are not a multiple of %s's block of %d "
                            "values",
                            t->name, (long long)n, s->name, s->block_values);
    if (is_quantized(t->type) && !allow_requantize)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "tensor %s is already quantized (%s); quantizing it again to %s loses "
                            "more precision: set allow_requantize: true to do it anyway",
                            t->name, em_tensor_type_name(t->type), s->name);
    if (!em_ggml_type_supported((uint32_t)t->type))
        return em_error_new(EM_EXIT_BAD_INPUT, "tensor %s: cannot read %s values as floats",
                            t->name, em_tensor_type_name(t->type));
    return NULL;
}

/* The blocks of t quantized with s, in a new buffer of *nbytes. */
static void *quantize_tensor(const em_tensor *t, const em_quant_scheme *s, int threads,
                             size_t *nbytes) {
    int64_t n = t->shape[0], rows = em_tensor_numel(t) / n;
    size_t row_bytes = em_quant_row_bytes(s, n);
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
            em_quantize_rows(s, x, nr, n, NULL, out + r0 * (int64_t)row_bytes);
        }
        free(x);
    }
    return out;
}

/* A checksum naming the source and the quantization, in place of the file header's. */
static void quantized_sha256(const em_model *src, const em_quantize_options *opt, char hex[65]) {
    char text[256];
    snprintf(text, sizeof text, "%s quantize %s embeddings=%d output=%d", src->header_sha256,
             opt->plan.scheme, opt->plan.embeddings, opt->plan.output);
    em_sha256_hex(text, strlen(text), hex);
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
        const em_quant_scheme *s = em_quant_plan_scheme_for(&opt->plan, src, t);
        em_status err = s ? check_tensor(t, s, opt->allow_requantize) : NULL;
        if (err) return err;
    }
    em_model *m;
    em_status err = em_model_load(src->path, &m);
    if (err) return err;
    if (strcmp(m->header_sha256, src->header_sha256) != 0) {
        em_model_free(m);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s changed on disk since it was loaded", src->path);
    }
    int threads = opt->threads > 0 ? opt->threads : omp_get_max_threads();
    em_model_storage *storage = m->impl;
    for (size_t i = 0; i < m->tensor_count; i++) {
        em_tensor *t = &m->tensors[i];
        const em_quant_scheme *s = em_quant_plan_scheme_for(&opt->plan, m, t);
        if (!s) continue;
        size_t nbytes;
        void *blocks = em_model_storage_keep(storage, quantize_tensor(t, s, threads, &nbytes));
        summary->quantized++;
        summary->bytes_before += t->nbytes;
        summary->bytes_after += nbytes;
        t->type = (em_tensor_type)s->type;
        t->data = blocks;
        t->nbytes = nbytes;
    }
    quantized_sha256(src, opt, m->header_sha256);
    *out = m;
    return NULL;
}
