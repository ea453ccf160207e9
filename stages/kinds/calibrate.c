/* Stage `calibrate`: per-input-channel activation statistics of every linear layer of a model
 * (stages/quant/activation_stats.h: sum of x^2, sum of |x|, max |x|, tokens), the importance
 * matrix of llama-imatrix and what AWQ needs, for the quantize stage's calibrated methods.
 *
 * It runs the `model` over this rank's windows of `data` (split over the mesh's dp group as for
 * evaluation) on the forward backend of `device:`, with an observer on the inputs of the linear
 * layers (stages/kernels/linear_inputs.h): per layer, the attention norm's output (read by
 * attn_q, attn_k and attn_v), attention's output (attn_output), the MLP norm's output (ffn_gate
 * and ffn_up) and the gated activation (ffn_down). Every position of every window counts as a
 * token. Per window and channel the sums run over the window's tokens in order in double (a
 * window's activations are the same bits on any rank, with any thread count), and each window's
 * sum goes into an exact fixed-point accumulator of resolution 2^-96 (runner/comm/fine_sum.h)
 * whose all-reduce does not depend on the order: the statistics are the same bits for any world
 * size. max |x| and the token count reduce exactly anyway.
 *
 * With `from:` it reads the statistics of an earlier run (or llama-imatrix's) from an imatrix
 * file instead (GGUF or legacy .dat, stages/quant/imatrix_file.h) and checks them against the
 * model: every entry names a tensor of the model with as many input channels, and every linear
 * weight of the model has an entry (exit 2 naming the first that does not).
 *
 * Rank 0 writes the statistics to the run directory as a llama.cpp GGUF imatrix (`output:`,
 * default <stage>.imatrix.gguf) and, with `dat:`, as a legacy .dat too, and logs what was
 * calibrated on how many tokens. Produces an "activation_stats" artifact (em_activation_stats *).
 * Needs tp = cp = 1: every rank computes whole windows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/comm.h"
#include "runner/comm/fine_sum.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "util/clock.h"
#include "util/log.h"
#include "stages/data/dataset.h"
#include "stages/kernels/forward_backend.h"
#include "stages/kernels/linear_inputs.h"
#include "stages/kinds/support/forward_device.h"
#include "stages/kinds/support/mesh_checks.h"
#include "stages/kinds/support/stage_threads.h"
#include "stages/model/loaded_model.h"
#include "stages/quant/activation_stats.h"
#include "stages/quant/imatrix_file.h"

typedef struct calibrate_state {
    int threads;
    const em_forward_backend *backend;
    char *from; /* the `from:` file, resolved; NULL: run the model */
} calibrate_state;

static const em_input_spec calibrate_inputs[] = {
    {"model", {"model"}, false, false},
    {"data", {"dataset"}, false, true},
    {"mesh", {"mesh"}, false, true},
    {0},
};

/* The weights that read each site (linear_inputs.h), up to three. */
static const em_tensor *site_weight(const em_layer_weights *w, em_linear_site site, int i) {
    const em_tensor *const by_site[EM_LINEAR_SITES][3] = {
        [EM_LINEAR_QKV] = {w->wq, w->wk, w->wv},
        [EM_LINEAR_ATTN_OUT] = {w->wo},
        [EM_LINEAR_GATE_UP] = {w->w_gate, w->w_up},
        [EM_LINEAR_DOWN] = {w->w_down},
    };
    return by_site[site][i];
}

/* One site's accumulators over this rank's windows. */
typedef struct site_sums {
    int64_t columns;
    em_fine_sum *x2, *abs; /* (columns) */
    float *max;            /* (columns) */
} site_sums;

typedef struct collector {
    const em_model *model;
    site_sums *sites; /* (n_layers, EM_LINEAR_SITES) */
    int threads;
    int64_t misfit; /* columns of an input whose width was not its site's (a bug); 0 when none */
} collector;

/* The observer: one window's sums per channel, in token order, into the exact accumulators. */
static void observe(void *user, int layer, em_linear_site site, const em_linear_input *x) {
    collector *c = user;
    site_sums *s = &c->sites[(size_t)layer * EM_LINEAR_SITES + site];
    if (x->K != s->columns) {
        c->misfit = x->K;
        return;
    }
#pragma omp parallel for num_threads(c->threads) schedule(static)
    for (int k = 0; k < x->K; k++) {
        double x2 = 0.0, abs_sum = 0.0;
        float max = s->max[k];
        for (int t = 0; t < x->T; t++) {
            float v = em_linear_input_at(x, t, k);
            x2 += (double)v * v; /* exact: a float's square fits a double */
            abs_sum += fabsf(v);
            if (fabsf(v) > max || isnan(v)) max = fabsf(v); /* a NaN stays */
        }
        em_fine_sum_add(&s->x2[k], x2);
        em_fine_sum_add(&s->abs[k], abs_sum);
        s->max[k] = max;
    }
}

static int64_t site_columns(const em_llama_config *c, em_linear_site site) {
    if (site == EM_LINEAR_ATTN_OUT) return (int64_t)c->n_heads * c->head_dim;
    if (site == EM_LINEAR_DOWN) return c->ffn_dim;
    return c->dim;
}

static void collector_init(collector *c, const em_model *m, int threads) {
    size_t n = (size_t)m->config.n_layers * EM_LINEAR_SITES;
    *c = (collector){.model = m, .threads = threads};
    c->sites = em_xcalloc(n, sizeof *c->sites);
    for (size_t i = 0; i < n; i++) {
        site_sums *s = &c->sites[i];
        s->columns = site_columns(&m->config, (em_linear_site)(i % EM_LINEAR_SITES));
        s->x2 = em_xcalloc((size_t)s->columns, sizeof *s->x2);
        s->abs = em_xcalloc((size_t)s->columns, sizeof *s->abs);
        s->max = em_xcalloc((size_t)s->columns, sizeof *s->max);
    }
}

static void collector_free(collector *c) {
    for (size_t i = 0; c->sites && i < (size_t)c->model->config.n_layers * EM_LINEAR_SITES; i++) {
        free(c->sites[i].x2);
        free(c->sites[i].abs);
        free(c->sites[i].max);
    }
    free(c->sites);
}

/* Every site's sums, maxima and the tokens summed over the dp group (exactly). */
static em_status reduce(collector *c, em_comm *dp, int64_t *tokens, int64_t *longest) {
    size_t n = (size_t)c->model->config.n_layers * EM_LINEAR_SITES, channels = 0;
    for (size_t i = 0; i < n; i++) channels += (size_t)c->sites[i].columns;
    em_fine_sum *sums = em_xmalloc(2 * channels * sizeof *sums);
    float *max = em_xmalloc(channels * sizeof *max);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        site_sums *s = &c->sites[i];
        memcpy(sums + 2 * at, s->x2, (size_t)s->columns * sizeof *sums);
        memcpy(sums + 2 * at + (size_t)s->columns, s->abs, (size_t)s->columns * sizeof *sums);
        memcpy(max + at, s->max, (size_t)s->columns * sizeof *max);
        at += (size_t)s->columns;
    }
    em_status err = em_fine_sum_allreduce(dp, sums, 2 * channels);
    if (!err) err = em_allreduce(dp, max, max, channels, EM_DTYPE_FLOAT32, EM_OP_MAX);
    if (!err) err = em_allreduce(dp, tokens, tokens, 1, EM_DTYPE_INT64, EM_OP_SUM);
    if (!err) err = em_allreduce(dp, longest, longest, 1, EM_DTYPE_INT64, EM_OP_MAX);
    at = 0;
    for (size_t i = 0; i < n && !err; i++) {
        site_sums *s = &c->sites[i];
        memcpy(s->x2, sums + 2 * at, (size_t)s->columns * sizeof *sums);
        memcpy(s->abs, sums + 2 * at + (size_t)s->columns, (size_t)s->columns * sizeof *sums);
        memcpy(s->max, max + at, (size_t)s->columns * sizeof *max);
        at += (size_t)s->columns;
    }
    free(sums);
    free(max);
    return err;
}

/* The statistics per weight tensor, in layer order (q, k, v, output, gate, up, down). */
static em_status build_stats(const collector *c, int64_t tokens, em_activation_stats *out) {
    const em_model *m = c->model;
    size_t cap = (size_t)m->config.n_layers * 7;
    out->entries = em_xcalloc(cap, sizeof *out->entries);
    out->has_abs = true;
    for (int l = 0; l < m->config.n_layers; l++) {
        for (int site = 0; site < EM_LINEAR_SITES; site++) {
            const site_sums *s = &c->sites[(size_t)l * EM_LINEAR_SITES + site];
            for (int i = 0; i < 3 && site_weight(&m->layers[l], site, i); i++) {
                const em_tensor *w = site_weight(&m->layers[l], site, i);
                em_activation_stat *e = &out->entries[out->n++];
                e->name = em_xstrdup(w->name);
                e->columns = s->columns;
                e->count = tokens;
                e->sum_x2 = em_xmalloc((size_t)s->columns * sizeof *e->sum_x2);
                e->sum_abs = em_xmalloc((size_t)s->columns * sizeof *e->sum_abs);
                e->max_abs = em_xmalloc((size_t)s->columns * sizeof *e->max_abs);
                for (int64_t k = 0; k < s->columns; k++) {
                    e->sum_x2[k] = em_fine_sum_value(&s->x2[k]);
                    e->sum_abs[k] = em_fine_sum_value(&s->abs[k]);
                    e->max_abs[k] = s->max[k];
                    if (!isfinite(e->sum_x2[k]) || !isfinite(e->sum_abs[k]) || isnan(s->max[k]))
                        return em_error_new(EM_EXIT_RUNTIME,
                                            "the input of %s has a NaN, infinite or too large "
                                            "value in channel %lld",
                                            w->name, (long long)k);
                }
            }
        }
    }
    return NULL;
}

/* What calibrate does that splits no window (mesh_checks.h). */
static const char whole_windows[] = "calibrate computes whole windows on each rank";

static em_status calibrate_init(em_stage *self, const em_run_context *ctx) {
    calibrate_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    bool has_data = em_stage_input_count(self, "data") > 0;
    const em_node *from = em_node_get(self->options, "from");
    if (has_data == !em_node_is_null(from))
        return em_error_at(EM_EXIT_BAD_INPUT, from ? from->mark : self->mark,
                           "stage '%s': give either `data:` (calibrate on a dataset) or `from:` "
                           "(an imatrix file), %s",
                           self->name, has_data ? "not both" : "one of them");
    if (!has_data) return em_stage_input_file(self, "from", false, &st->from);
    em_status err = em_stage_check_dataset_mesh(self);
    if (!err) err = em_stage_check_whole_windows(self, whole_windows);
    if (!err) err = em_stage_forward_backend(self, EM_FORWARD_OBSERVE, &st->backend);
    if (err) return err;
    st->threads = em_stage_threads(self, ctx);
    return NULL;
}

/* This rank's windows through the model with the collector observing; *tokens and *longest are
 * this rank's positions and longest window. */
static em_status run_windows(calibrate_state *st, const em_dataset *ds, collector *c,
                             int64_t *tokens, int64_t *longest) {
    const em_forward_backend *be = st->backend;
    em_forward_groups alone = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 1}};
    void *f = NULL;
    em_status err = be->create(c->model, &alone, st->threads, &(em_forward_options){0}, &f);
    if (err) return err;
    be->observe(f, &(em_linear_observer){observe, c});
    size_t most = 1;
    for (size_t i = 0; i < ds->count; i++)
        if ((size_t)ds->windows[i].length > most) most = (size_t)ds->windows[i].length;
    double *nll = em_xmalloc(most * sizeof *nll);
    int32_t *argmax = em_xmalloc(most * sizeof *argmax);
    for (size_t i = 0; i < ds->count && !err; i++) {
        const em_window *w = &ds->windows[i];
        err = em_forward_score_window(be, f, w->input, w->target, w->length, w->score_from, nll,
                                      argmax);
        if (err) err = em_error_prefix(err, "window %lld", (long long)w->index);
        *tokens += w->length;
        if (w->length > *longest) *longest = w->length;
    }
    free(nll);
    free(argmax);
    be->free(f);
    return err;
}

static em_status calibrate_data(calibrate_state *st, const em_stage *self, const em_model *m,
                                const em_dataset *ds, em_mesh *mesh, em_activation_stats *out) {
    em_status err = em_stage_mesh_whole_windows(self, mesh, whole_windows);
    if (err) return err;
    if (ds->total_windows == 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "dataset '%s' (%s) gave no calibration window: its text is shorter "
                            "than one window",
                            em_stage_input_producer(self, "data", 0)->name, ds->path);
    collector c;
    collector_init(&c, m, st->threads);
    int64_t tokens = 0, longest = 0;
    err = run_windows(st, ds, &c, &tokens, &longest);
    if (!err && c.misfit)
        err = em_error_new(EM_EXIT_FAILURE,
                           "the forward showed a linear input of %lld columns "
                           "that is no site's width",
                           (long long)c.misfit);
    if (!err) err = reduce(&c, mesh->dp_group, &tokens, &longest);
    if (!err) err = build_stats(&c, tokens, out);
    collector_free(&c);
    out->tokens = tokens;
    out->windows = ds->total_windows;
    out->window_len = longest;
    out->dataset = em_xstrdup(ds->path ? ds->path : "");
    return err;
}

/* Statistics read from a file must be this model's: an entry per linear weight, same widths. */
static em_status check_against(const em_activation_stats *s, const em_model *m, const char *path) {
    for (size_t i = 0; i < s->n; i++) {
        const em_activation_stat *e = &s->entries[i];
        const em_tensor *t = em_model_find_tensor(m, e->name);
        if (!t)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: entry '%s' names no tensor of model %s (statistics of "
                                "another model?)",
                                path, e->name, m->path);
        if (t->shape[0] != e->columns)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: entry '%s' has %lld input channels, but the tensor of model "
                                "%s has %lld (statistics of another model?)",
                                path, e->name, (long long)e->columns, m->path,
                                (long long)t->shape[0]);
    }
    for (int l = 0; l < m->config.n_layers; l++)
        for (int site = 0; site < EM_LINEAR_SITES; site++)
            for (int i = 0; i < 3 && site_weight(&m->layers[l], site, i); i++) {
                const char *name = site_weight(&m->layers[l], site, i)->name;
                if (!em_activation_stats_find(s, name))
                    return em_error_new(EM_EXIT_BAD_INPUT,
                                        "%s: has no entry for tensor '%s' of model %s "
                                        "(statistics of another model?)",
                                        path, name, m->path);
            }
    return NULL;
}

/* A path of the run directory (relative) or as given (absolute). */
static char *in_run_dir(const em_run_context *ctx, const char *path) {
    return path[0] == '/' || !ctx->run_dir ? em_xstrdup(path)
                                           : em_xasprintf("%s/%s", ctx->run_dir, path);
}

static em_status write_files(const em_stage *self, const em_run_context *ctx,
                             const em_activation_stats *s) {
    const char *output = em_node_get_string(self->options, "output", NULL);
    char *name = output ? em_xstrdup(output) : em_xasprintf("%s.imatrix.gguf", self->name);
    char *path = in_run_dir(ctx, name);
    em_status err = em_imatrix_write_gguf(s, path);
    if (!err) em_log_info("calibrate %s: wrote %s", self->name, path);
    free(path);
    free(name);
    const char *dat = em_node_get_string(self->options, "dat", NULL);
    if (!err && dat) {
        path = in_run_dir(ctx, dat);
        err = em_imatrix_write_dat(s, path);
        if (!err) em_log_info("calibrate %s: wrote %s", self->name, path);
        free(path);
    }
    return err;
}

static void free_stats(void *data) {
    em_activation_stats_free(data);
}

static em_status calibrate_run(em_stage *self, const em_run_context *ctx) {
    calibrate_state *st = self->state;
    const em_model *m = em_stage_input_artifact(self, "model", 0)->data;
    double start = em_clock_seconds();
    em_activation_stats *s = NULL;
    em_status err;
    if (st->from) {
        err = em_imatrix_read(st->from, &s);
        if (!err) err = check_against(s, m, st->from);
    } else {
        s = em_xcalloc(1, sizeof *s);
        err = calibrate_data(st, self, m, em_stage_input_artifact(self, "data", 0)->data,
                             em_stage_mesh(self, ctx), s);
    }
    if (!err && ctx->rank == 0) {
        em_log_info("calibrate %s: %s%s, %lld windows of %lld tokens, %lld tokens, %zu weight "
                    "tensors, model %s, in %.2f s",
                    self->name, st->from ? "read from " : "", st->from ? st->from : s->dataset,
                    (long long)s->windows, (long long)s->window_len, (long long)s->tokens, s->n,
                    m->path, em_clock_seconds() - start);
        err = write_files(self, ctx, s);
    }
    if (err) {
        em_activation_stats_free(s);
        return err;
    }
    self->output = (em_artifact){.data = s, .free = free_stats};
    return NULL;
}

static void calibrate_destroy(em_stage *self) {
    calibrate_state *st = self->state;
    if (st) free(st->from);
    free(st);
}

const em_stage_kind em_stage_kind_calibrate = {
    .name = "calibrate",
    .summary = "per-input-channel activation statistics of every linear layer over calibration "
               "windows (llama-imatrix's importance matrix, AWQ's scales), or read from an "
               "imatrix file; the same bits on any world size",
    .produces = EM_ACTIVATION_STATS_TYPE,
    .inputs = calibrate_inputs,
    .collective = true,     /* over the mesh's dp group */
    .writes_results = true, /* the imatrix file */
    .init = calibrate_init,
    .run = calibrate_run,
    .destroy = calibrate_destroy,
};
