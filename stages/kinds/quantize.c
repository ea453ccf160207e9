/* Stage `quantize`: quantizes the model of its `model` input (stages/quant/quantize_model.h) and
 * produces a new "model" artifact (data = em_model *) holding the quantized tensors, which the
 * forward runs directly. Options: model, scheme (a scheme of the tensor-type table,
 * stages/formats/ggml_types.c, or a llama-quantize mix, or torchao's int8_weight_only /
 * int4_weight_only with group_size), embeddings, output, exclude (tensor names to keep),
 * allow_requantize, threads, gguf (rank 0 writes the quantized model there as a GGUF file llama.cpp
 * loads; a relative path is in the run directory). A tensor whose rows the scheme's block does not
 * divide gets llama-quantize's fallback type (stages/quant/type_fallback.h), logged, unless
 * `strict: true`; a tensor the scheme cannot take (row length when strict or without a fallback,
 * already quantized) stops the stage with exit 2 and the place of `scheme`.
 *
 * Calibration (quantize_model.h): `imatrix` names a calibrate stage (its activation statistics),
 * or `imatrix_file` a llama.cpp importance-matrix file (GGUF or legacy .dat, relative to the
 * recipe); `method` is rtn (default: importance-weighted rounding, llama-quantize --imatrix),
 * awq (activation-aware scaling, awq.h, then plain rounding) or awq_imatrix (the scaling, then
 * importance-weighted rounding); the awq methods need statistics. Statistics that miss a tensor the
 * plan quantizes, or whose columns differ from its rows, stop the stage with exit 2 naming the
 * tensor and the place of the option that gave them. What was calibrated (method, tokens, windows,
 * the dataset, the tensors, AWQ's exponents and estimated errors) goes to the log and, on rank 0,
 * to <run dir>/<stage>.calibration.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/stage.h"
#include "util/log.h"
#include "util/atomic_file.h"
#include "stages/kinds/support/stage_threads.h"
#include "stages/model/loaded_model.h"
#include "stages/quant/activation_stats.h"
#include "stages/quant/imatrix_file.h"
#include "stages/quant/quant_gguf.h"
#include "stages/quant/quantize_model.h"

typedef struct quantize_state {
    em_quantize_options opt;
    em_mark scheme_mark;
    char scheme[32];  /* the table's row: int4_weight_only becomes int4_weight_only_g<group_size> */
    const char *gguf; /* write the quantized model there (relative: to the run directory) */
    const char **exclude;
    em_mark stats_mark;             /* the imatrix or imatrix_file option */
    char *imatrix_file;             /* statistics from this file (read in run) */
    em_activation_stats *own_stats; /* those statistics */
} quantize_state;

/* The methods, as recipes spell them. */
static const struct {
    const char *name;
    em_quant_method method;
} methods[] = {
    {"rtn", EM_QUANT_RTN},
    {"awq", EM_QUANT_AWQ},
    {"awq_imatrix", EM_QUANT_AWQ_IMATRIX},
};

static const char *method_name(em_quant_method m) {
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].method == m) return methods[i].name;
    return "?";
}

static const em_input_spec quantize_inputs[] = {
    {"model", {"model"}, false, false},
    {"imatrix", {EM_ACTIVATION_STATS_TYPE}, false, true},
    {NULL, {NULL}, false, false},
};

static em_status quantize_init(em_stage *self, const em_run_context *ctx) {
    quantize_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    const em_node *scheme = em_node_get(self->options, "scheme");
    st->scheme_mark = scheme->mark;
    const char *name = em_node_get_string(self->options, "scheme", "");
    if (strcmp(name, "int4_weight_only") == 0) {
        int64_t group = 128;
        const em_node *g = em_node_get(self->options, "group_size");
        em_status err = em_node_is_null(g) ? NULL : em_node_as_int(g, &group);
        if (err) return err;
        snprintf(st->scheme, sizeof st->scheme, "%s_g%lld", name, (long long)group);
    } else {
        snprintf(st->scheme, sizeof st->scheme, "%s", name);
    }
    st->opt.plan.scheme = st->scheme;
    if (!em_quant_plan_scheme_known(st->opt.plan.scheme))
        return em_error_at(EM_EXIT_BAD_INPUT, scheme->mark, "stage '%s': unknown scheme '%s'",
                           self->name, st->opt.plan.scheme);
    st->opt.plan.embeddings = em_node_get_bool(self->options, "embeddings", false);
    st->opt.plan.output = em_node_get_bool(self->options, "output", false);
    st->opt.allow_requantize = em_node_get_bool(self->options, "allow_requantize", false);
    st->opt.plan.strict = em_node_option_bool(self->options, "strict");
    st->gguf = em_node_get_string(self->options, "gguf", NULL);
    const char *method = em_node_get_string(self->options, "method", "rtn");
    const em_node *method_node = em_node_get(self->options, "method");
    size_t mi = 0;
    while (mi < sizeof methods / sizeof methods[0] && strcmp(methods[mi].name, method) != 0) mi++;
    if (mi == sizeof methods / sizeof methods[0])
        return em_error_at(EM_EXIT_BAD_INPUT, method_node->mark,
                           "stage '%s': unknown method '%s' (rtn, awq or awq_imatrix)", self->name,
                           method);
    st->opt.method = methods[mi].method;
    const em_node *imatrix = em_node_get(self->options, "imatrix");
    const em_node *imatrix_file = em_node_get(self->options, "imatrix_file");
    if (!em_node_is_null(imatrix) && !em_node_is_null(imatrix_file))
        return em_error_at(EM_EXIT_BAD_INPUT, imatrix_file->mark,
                           "stage '%s': imatrix and imatrix_file both give statistics; keep one",
                           self->name);
    if (!em_node_is_null(imatrix_file)) {
        st->stats_mark = imatrix_file->mark;
        em_status err = em_stage_input_file(self, "imatrix_file", false, &st->imatrix_file);
        if (err) return err;
    } else if (!em_node_is_null(imatrix)) {
        st->stats_mark = imatrix->mark;
    } else if (st->opt.method != EM_QUANT_RTN) {
        return em_error_at(EM_EXIT_BAD_INPUT, method_node->mark,
                           "stage '%s': method %s needs calibration statistics (imatrix: a "
                           "calibrate stage, or imatrix_file)",
                           self->name, method);
    }
    const em_node *exclude = em_node_get(self->options, "exclude");
    if (exclude && exclude->kind == EM_NODE_SEQ) {
        st->exclude = em_xcalloc(exclude->count ? exclude->count : 1, sizeof *st->exclude);
        for (size_t i = 0; i < exclude->count; i++) {
            em_status err = em_node_as_string(exclude->items[i], &st->exclude[i]);
            if (err) return err;
        }
        st->opt.plan.exclude = st->exclude;
        st->opt.plan.exclude_count = exclude->count;
    }
    st->opt.threads = em_stage_threads(self, ctx);
    return NULL;
}

/* s as a JSON string's contents: quotes, backslashes and control characters escaped. */
static char *json_escape(const char *s) {
    char *out = em_xmalloc(strlen(s) * 6 + 1), *o = out;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20) {
            o += sprintf(o, "\\u%04x", c);
        } else {
            *o++ = (char)c;
        }
    }
    *o = '\0';
    return out;
}

/* What was calibrated, as JSON members (also the log line). */
static char *calibration_record(const em_stage *self, const quantize_state *st,
                                const em_quantize_summary *sum) {
    const em_activation_stats *s = st->opt.stats;
    char *source = json_escape(
        st->imatrix_file ? st->imatrix_file : em_stage_input_producer(self, "imatrix", 0)->name);
    char *dataset = json_escape(s->dataset ? s->dataset : "");
    char *awq =
        st->opt.method == EM_QUANT_RTN
            ? em_xstrdup("")
            : em_xasprintf(", \"awq_groups\": %zu, \"awq_mean_alpha\": %.4f, "
                           "\"awq_error\": %.6g, \"awq_error_plain\": %.6g",
                           sum->awq_groups,
                           sum->awq_groups ? sum->awq_alpha_sum / (double)sum->awq_groups : 0.0,
                           sum->awq_error, sum->awq_error_plain);
    char *r = em_xasprintf("\"method\": \"%s\", \"scheme\": \"%s\", \"statistics\": \"%s\", "
                           "\"dataset\": \"%s\", \"tokens\": %lld, \"windows\": %lld, "
                           "\"window_len\": %lld, \"entries\": %zu, \"tensors_quantized\": "
                           "%zu, \"tensors_importance_weighted\": %zu%s",
                           method_name(st->opt.method), st->opt.plan.scheme, source, dataset,
                           (long long)s->tokens, (long long)s->windows, (long long)s->window_len,
                           s->n, sum->quantized, sum->weighted, awq);
    free(awq);
    free(source);
    free(dataset);
    return r;
}

static void free_model(void *data) {
    em_model_free(data);
}

static em_status quantize_run(em_stage *self, const em_run_context *ctx) {
    quantize_state *st = self->state;
    const em_model *src = em_stage_input_artifact(self, "model", 0)->data;
    const em_node *exclude = em_node_get(self->options, "exclude");
    for (size_t i = 0; i < st->opt.plan.exclude_count; i++)
        if (!em_model_find_tensor(src, st->exclude[i]))
            return em_error_at(EM_EXIT_BAD_INPUT, exclude->items[i]->mark,
                               "exclude: the model has no tensor '%s'", st->exclude[i]);
    em_status err = NULL;
    if (st->imatrix_file && !st->own_stats) {
        err = em_imatrix_read(st->imatrix_file, &st->own_stats);
        if (err) return err;
    }
    st->opt.stats = st->own_stats ? st->own_stats
                    : em_stage_input_count(self, "imatrix")
                        ? em_stage_input_artifact(self, "imatrix", 0)->data
                        : NULL;
    char where[1024];
    err = em_quantize_check_stats(src, &st->opt);
    if (err) {
        em_mark_format(st->stats_mark, where, sizeof where);
        return em_error_prefix(err, "%s: scheme %s", where, st->opt.plan.scheme);
    }
    em_model *m;
    em_quantize_summary sum;
    err = em_quantize_model(src, &st->opt, &m, &sum);
    if (err) {
        em_mark_format(st->scheme_mark, where, sizeof where);
        return em_error_prefix(err, "%s: scheme %s", where, st->opt.plan.scheme);
    }
    em_log_info("quantize %s: %s, %zu tensors, %.1f MiB -> %.1f MiB", self->name,
                st->opt.plan.scheme, sum.quantized, (double)sum.bytes_before / (1 << 20),
                (double)sum.bytes_after / (1 << 20));
    if (st->opt.stats) {
        char *record = calibration_record(self, st, &sum);
        em_log_info("quantize %s: %s", self->name, record);
        if (ctx->rank == 0 && ctx->run_dir) {
            char *path = em_xasprintf("%s/%s.calibration.json", ctx->run_dir, self->name);
            char *json = em_xasprintf("{\"stage\": \"%s\", %s}\n", self->name, record);
            err = em_atomic_write(path, json, strlen(json), 0644);
            free(json);
            free(path);
        }
        free(record);
        if (err) {
            em_model_free(m);
            return err;
        }
    }
    if (st->gguf) {
        char *path = st->gguf[0] == '/' || !ctx->run_dir
                         ? em_xstrdup(st->gguf)
                         : em_xasprintf("%s/%s", ctx->run_dir, st->gguf);
        err = ctx->rank == 0 ? em_quantized_model_write_gguf(m, st->opt.plan.scheme, path) : NULL;
        if (!err && ctx->rank == 0) em_log_info("quantize %s: wrote %s", self->name, path);
        free(path);
        if (err) {
            em_model_free(m);
            return err;
        }
    }
    self->output = (em_artifact){.data = m, .free = free_model};
    return NULL;
}

static void quantize_destroy(em_stage *self) {
    quantize_state *st = self->state;
    if (st) {
        free(st->exclude);
        free(st->imatrix_file);
        em_activation_stats_free(st->own_stats);
    }
    free(st);
}

const em_stage_kind em_stage_kind_quantize = {
    .name = "quantize",
    .summary = "quantize a model's weights (ggml Q8_0 ... Q6_K, llama-quantize mixes) for the "
               "forward",
    .produces = "model",
    .inputs = quantize_inputs,
    .collective = false,
    .init = quantize_init,
    .run = quantize_run,
    .destroy = quantize_destroy,
};
