/* Stage `compare`: quantization-aware evaluation as llama.cpp's `perplexity --kl-divergence`,
 * without its logits file. The `reference` and each of the `candidates` (model or quantize
 * stages) stay resident; candidate by candidate, each of this rank's windows of `data` runs
 * through the reference's and the candidate's forwards and the
 * backend's paired head (forward_backend.h, score_pair), which walks the vocabulary tiles of the
 * two heads together, so per scored token it keeps only: both nll, both argmax and KL(P_ref ||
 * P_cand) over the whole vocabulary; dp = p_cand(target) - p_ref(target). No (T, vocab) array
 * and no per-token distribution outlives its window.
 *
 * Over the mesh's dp group it gathers every scored token's record (both nll, KL, dp, argmax
 * agreement: 40 bytes a token, no distribution) in window order: dp ranks hold contiguous ranges
 * of windows in window order, so every rank holds the same records in the same order for any
 * world size, and sums them in that order in double, and sorts copies for the percentiles,
 * which are exact order statistics (no histogram). So the metrics are the same bits on every
 * rank and for any world size, at full double precision (KL values of 1e-8 and dp^4 lie far
 * below the 2^-32 resolution of the fixed-point sums the aggregate stage uses). The statistics
 * (stages/metrics/kld_stats.h) become metrics "<candidate stage>.<name>" (each a row of
 * stages/metrics/metric_table.c) of one "metrics" artifact, a row per candidate in the report's
 * table, that report and gate read.
 *
 * Paired scoring splits nothing: a mesh with tp or cp > 1 is refused. The dataset is tokenized
 * by one model stage; a model that descends from another model file must have a tokenizer that
 * gives every id the same meaning (vocabulary, BOS, EOS; compared in init, which refuses a
 * difference naming both stages, both files and the first differing token).
 *
 * With `records: true` each rank writes every scored token of its windows (both nll, both
 * argmaxes, KL) to the run directory (stages/metrics/pair_records.h).
 *
 * With `print_summary: true` rank 0 prints each candidate's statistics as llama-perplexity
 * --kl-divergence lays them out (stages/metrics/kld_summary.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/comm.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "util/clock.h"
#include "util/log.h"
#include "stages/data/dataset.h"
#include "stages/kernels/forward_backend.h"
#include "stages/kinds/support/forward_device.h"
#include "stages/kinds/support/mesh_checks.h"
#include "stages/kinds/support/stage_threads.h"
#include "stages/metrics/kld_stats.h"
#include "stages/metrics/kld_summary.h"
#include "stages/metrics/metrics.h"
#include "stages/metrics/pair_records.h"
#include "stages/model/loaded_model.h"
#include "stages/tokenizer/tokenizer.h"

/* What one scored token leaves behind. */
typedef struct token_record {
    double nll_base, nll; /* the reference's and the candidate's -log p(target) */
    double kld;           /* KL(P_ref || P_cand) */
    double dp;            /* p_cand(target) - p_ref(target) */
    double same_top;      /* 1 when both argmaxes agree, else 0 */
} token_record;

typedef struct compare_state {
    int threads;
    bool print_summary; /* `print_summary`: llama-perplexity's layout on rank 0 */
    bool records;       /* `records`: each rank writes its scored tokens (pair_records.h) */
    const em_forward_backend *backend;
} compare_state;

static const em_input_spec compare_inputs[] = {
    {"reference", {"model"}, false, false},
    {"candidates", {"model"}, true, false},
    {"data", {"dataset"}, false, false},
    {"mesh", {"mesh"}, false, true},
    {0},
};

/* The model stage a model or quantize stage descends from. */
static const em_stage *root_model(const em_stage *s) {
    while (s && strcmp(s->kind->name, "model") != 0) s = em_stage_input_producer(s, "model", 0);
    return s;
}

/* The file a model stage's tokenizer comes from: its `tokenizer` option, else its model. */
static em_status tokenizer_file(const em_stage *model, char **path) {
    const char *option = em_node_get(model->options, "tokenizer") ? "tokenizer" : "path";
    return em_stage_input_file(model, option, true, path);
}

/* Both models must read the dataset's token ids as its tokenizer made them: a model descending
 * from the dataset's tokenizer stage, or from a model stage of the same tokenizer file, does;
 * any other has its tokenizer loaded and compared id by id with the dataset's (*data_tok, loaded
 * on first need and kept for the next model). */
static em_status check_tokenizer(const em_stage *self, const char *option, size_t index,
                                 em_tokenizer **data_tok) {
    const em_stage *data = em_stage_input_producer(self, "data", 0);
    const em_stage *tok = root_model(data ? em_stage_input_producer(data, "tokenizer", 0) : NULL);
    const em_stage *producer = em_stage_input_producer(self, option, index);
    const em_stage *mine = root_model(producer);
    if (!tok || !mine || tok == mine) return NULL;
    char *data_file = NULL, *my_file = NULL, why[512] = "";
    em_status err = tokenizer_file(tok, &data_file);
    if (!err) err = tokenizer_file(mine, &my_file);
    bool same = !err && strcmp(data_file, my_file) == 0;
    if (!err && !same && !*data_tok) err = em_tokenizer_load(data_file, data_tok);
    em_tokenizer *my_tok = NULL;
    if (!err && !same) err = em_tokenizer_load(my_file, &my_tok);
    if (!err && !same) {
        char *mine_name = em_xasprintf("model stage '%s' (%s)", mine->name, my_file);
        char *data_name = em_xasprintf("model stage '%s' (%s)", tok->name, data_file);
        same = em_tokenizer_same_ids(*data_tok, data_name, my_tok, mine_name, why, sizeof why);
        free(mine_name);
        free(data_name);
    }
    em_tokenizer_free(my_tok);
    free(data_file);
    free(my_file);
    if (!err && same) return NULL;
    const em_map_entry *e = em_node_get_entry(self->options, option);
    em_mark at = e ? e->value->mark : self->mark;
    if (err) {
        em_status out = em_error_at(EM_EXIT_BAD_INPUT, at,
                                    "stage '%s': cannot check that %s '%s' reads the token ids of "
                                    "dataset '%s': %s",
                                    self->name, option, producer->name, data->name, err->message);
        em_error_free(err);
        return out;
    }
    return em_error_at(EM_EXIT_BAD_INPUT, at,
                       "stage '%s': %s '%s' comes from model stage '%s', but dataset '%s' is "
                       "tokenized by model stage '%s': different tokenizers (%s)",
                       self->name, option, producer->name, mine->name, data->name, tok->name, why);
}

/* What compare does that splits no window (mesh_checks.h). */
static const char whole_windows[] = "compare scores both models of a window on one rank";

static em_status compare_init(em_stage *self, const em_run_context *ctx) {
    compare_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    em_status err = em_stage_check_dataset_mesh(self);
    if (!err) err = em_stage_check_whole_windows(self, whole_windows);
    em_tokenizer *data_tok = NULL;
    if (!err) err = check_tokenizer(self, "reference", 0, &data_tok);
    for (size_t i = 0; i < em_stage_input_count(self, "candidates") && !err; i++)
        err = check_tokenizer(self, "candidates", i, &data_tok);
    em_tokenizer_free(data_tok);
    if (!err) err = em_stage_forward_backend(self, EM_FORWARD_PAIRS, &st->backend);
    if (err) return err;
    st->threads = em_stage_threads(self, ctx);
    st->print_summary = em_node_option_bool(self->options, "print_summary");
    st->records = em_node_option_bool(self->options, "records");
    return NULL;
}

/* This rank's records, in window order. */
typedef struct pair_scores {
    token_record *records; /* (tokens) */
    size_t tokens;
} pair_scores;

/* Scores this rank's windows into ps, and appends them to pw when it is not NULL. */
static em_status score_windows(compare_state *st, const em_model *ref, const em_model *cand,
                               const em_dataset *ds, em_pair_writer *pw, pair_scores *ps) {
    const em_forward_backend *be = st->backend;
    if (ref->config.n_vocab != cand->config.n_vocab)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the reference has a vocabulary of %lld, the candidate of %lld",
                            (long long)ref->config.n_vocab, (long long)cand->config.n_vocab);
    em_forward_groups alone = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 1}};
    void *fr = NULL, *fc = NULL;
    const em_forward_options defaults = {0}; /* the forward's default weight storage */
    em_status err = be->create(ref, &alone, st->threads, &defaults, &fr);
    if (err) return em_error_prefix(err, "reference");
    err = be->create(cand, &alone, st->threads, &defaults, &fc);
    if (err) {
        be->free(fr);
        return em_error_prefix(err, "candidate");
    }
    int longest = 1;
    for (size_t i = 0; i < ds->count; i++) {
        ps->tokens += (size_t)(ds->windows[i].length - ds->windows[i].score_from);
        if (ds->windows[i].length > longest) longest = ds->windows[i].length;
    }
    size_t n = ps->tokens ? ps->tokens : 1, m = (size_t)longest;
    ps->records = em_xmalloc(n * sizeof *ps->records);
    double *kld = em_xmalloc(m * sizeof *kld);
    double *nll_r = em_xmalloc(m * sizeof *nll_r), *nll_c = em_xmalloc(m * sizeof *nll_c);
    int32_t *arg_r = em_xmalloc(m * sizeof *arg_r), *arg_c = em_xmalloc(m * sizeof *arg_c);
    size_t at = 0;
    for (size_t i = 0; i < ds->count && !err; i++) {
        const em_window *w = &ds->windows[i];
        int k = w->length - w->score_from;
        err = be->score_pair(fr, fc, w->input, w->target, w->length, w->score_from, nll_r, arg_r,
                             nll_c, arg_c, kld);
        if (!err && pw)
            err = em_pair_append(pw, w->index, w->score_from, k, w->target + w->score_from, arg_r,
                                 arg_c, nll_r, nll_c, kld);
        if (err) {
            err = em_error_prefix(err, "window %lld", (long long)w->index);
            break;
        }
        for (int t = 0; t < k; t++, at++)
            ps->records[at] =
                (token_record){nll_r[t], nll_c[t], kld[t], exp(-nll_c[t]) - exp(-nll_r[t]),
                               arg_r[t] == arg_c[t] ? 1.0 : 0.0};
    }
    free(kld);
    free(nll_r);
    free(nll_c);
    free(arg_r);
    free(arg_c);
    be->free(fr);
    be->free(fc);
    return err;
}

/* Every dp rank's records, concatenated in dp rank order (so in window order), into *all, *total
 * of them. */
static em_status gather_records(em_comm *dp, const pair_scores *ps, token_record **all,
                                int64_t *total) {
    int64_t count = (int64_t)ps->tokens, most = 0;
    int64_t *counts = em_xcalloc((size_t)dp->size, sizeof *counts);
    em_status err = em_allgather(dp, &count, counts, sizeof count);
    *total = 0;
    for (int r = 0; r < dp->size && !err; r++) {
        if (counts[r] > most) most = counts[r];
        *total += counts[r];
    }
    /* equal blocks of `most` records, allgather's shape; each rank fills the front of its own */
    size_t block = (size_t)(most ? most : 1);
    token_record *padded = em_xcalloc(block, sizeof *padded);
    token_record *gathered = em_xcalloc(block * (size_t)dp->size, sizeof *gathered);
    if (ps->tokens) memcpy(padded, ps->records, ps->tokens * sizeof *padded);
    if (!err) err = em_allgather(dp, padded, gathered, block * sizeof *padded);
    *all = em_xcalloc((size_t)(*total ? *total : 1), sizeof **all);
    size_t next = 0;
    for (int r = 0; r < dp->size && !err; r++) {
        memcpy(*all + next, gathered + (size_t)r * block, (size_t)counts[r] * sizeof **all);
        next += (size_t)counts[r];
    }
    free(padded);
    free(gathered);
    free(counts);
    return err;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The statistics of n records (n > 0), summed in their order. */
static em_kld_stats statistics(const token_record *r, int64_t n) {
    em_kld_totals t = {.count = n};
    double *kld = em_xmalloc((size_t)n * sizeof *kld), *dp = em_xmalloc((size_t)n * sizeof *dp);
    for (int64_t i = 0; i < n; i++) {
        t.sum_nll += r[i].nll;
        t.sum_nll2 += r[i].nll * r[i].nll;
        t.sum_nll_base += r[i].nll_base;
        t.sum_nll_base2 += r[i].nll_base * r[i].nll_base;
        t.sum_nll_nll_base += r[i].nll * r[i].nll_base;
        t.sum_kld += r[i].kld;
        t.sum_kld2 += r[i].kld * r[i].kld;
        t.sum_dp += r[i].dp;
        t.sum_dp2 += r[i].dp * r[i].dp;
        t.sum_dp4 += r[i].dp * r[i].dp * r[i].dp * r[i].dp;
        t.same_top += r[i].same_top != 0;
        kld[i] = r[i].kld;
        dp[i] = r[i].dp;
    }
    qsort(kld, (size_t)n, sizeof *kld, compare_doubles);
    qsort(dp, (size_t)n, sizeof *dp, compare_doubles);
    em_kld_stats s = em_kld_stats_compute(&t, kld, dp);
    free(kld);
    free(dp);
    return s;
}

/* A statistic with its standard error. */
static void put_value_error(em_metrics *m, const char *stage, const char *name,
                            const em_value_error *x) {
    em_metrics_put_with_error(m, stage, name, x->value, x->error);
}

/* "p99_9", "p50", "p05", "p00_1" for 0.999, 0.50, 0.05, 0.001. */
static void percentile_name(char *buf, size_t size, const char *prefix, double at) {
    int tenths = (int)lround(at * 1000.0);
    if (tenths % 10)
        snprintf(buf, size, "%s_p%02d_%d", prefix, tenths / 10, tenths % 10);
    else
        snprintf(buf, size, "%s_p%02d", prefix, tenths / 10);
}

static void set_metrics(em_metrics *m, const char *stage, const em_kld_stats *s, int64_t tokens) {
    put_value_error(m, stage, "ppl", &s->ppl);
    put_value_error(m, stage, "ppl_base", &s->ppl_base);
    put_value_error(m, stage, "ln_ppl_ratio", &s->ln_ppl_ratio);
    put_value_error(m, stage, "ppl_ratio", &s->ppl_ratio);
    put_value_error(m, stage, "ppl_diff", &s->ppl_diff);
    em_metrics_put(m, stage, "ln_ppl_correlation", s->ln_ppl_correlation);
    put_value_error(m, stage, "kld_mean", &s->kld);
    em_metrics_put(m, stage, "kld_max", s->kld_max);
    em_metrics_put(m, stage, "kld_min", s->kld_min);
    char name[64];
    for (int i = 0; i < EM_KLD_PERCENTILES; i++) {
        percentile_name(name, sizeof name, "kld", em_kld_percentile_at[i]);
        em_metrics_put(m, stage, name, s->kld_percentile[i]);
    }
    put_value_error(m, stage, "dp_mean", &s->dp);
    put_value_error(m, stage, "dp_rms", &s->dp_rms);
    em_metrics_put(m, stage, "dp_max", s->dp_max);
    em_metrics_put(m, stage, "dp_min", s->dp_min);
    for (int i = 0; i < EM_DP_PERCENTILES; i++) {
        percentile_name(name, sizeof name, "dp", em_dp_percentile_at[i]);
        em_metrics_put(m, stage, name, s->dp_percentile[i]);
    }
    put_value_error(m, stage, "same_top", &s->same_top);
    em_metrics_put(m, stage, "tokens", (double)tokens);
}

static void free_metrics(void *data) {
    em_metrics_free(data);
}

/* One candidate against the reference: its metrics "<candidate stage>.<name>" into m. */
static em_status compare_one(const em_stage *self, const em_run_context *ctx, const em_model *ref,
                             const em_model *cand, const char *name, const em_dataset *ds,
                             em_mesh *mesh, em_metrics *m) {
    compare_state *st = self->state;
    double start = em_clock_seconds();
    pair_scores ps = {0};
    token_record *all = NULL;
    int64_t total = 0;
    em_pair_writer *pw = NULL;
    em_status err = NULL;
    if (st->records && ctx->run_dir) {
        em_pair_key key = {ref->digest, cand->digest, ds->sha256};
        err = em_pair_writer_open(ctx->run_dir, self->name, name, ctx->rank, &key, &pw);
    }
    if (!err) err = score_windows(st, ref, cand, ds, pw, &ps);
    em_status closed = em_pair_writer_close(pw);
    if (!err)
        err = closed;
    else
        em_error_free(closed);
    if (!err) err = gather_records(mesh->dp_group, &ps, &all, &total);
    for (int64_t i = 0; i < total && !err; i++)
        if (!isfinite(all[i].nll) || !isfinite(all[i].nll_base) || !isfinite(all[i].kld))
            err = em_error_new(EM_EXIT_RUNTIME, "scored token %lld: a NaN or infinite value",
                               (long long)i);
    if (!err && total == 0) err = em_error_new(EM_EXIT_RUNTIME, "no token scored on any rank");
    if (!err) {
        em_kld_stats s = statistics(all, total);
        set_metrics(m, name, &s, total);
        if (st->print_summary) em_kld_summary_print(name, &s, total);
        em_log_info("compare %s: %lld tokens, mean KLD %.6f, same top %.4f%% in %.2f s", name,
                    (long long)total, s.kld.value, 100.0 * s.same_top.value,
                    em_clock_seconds() - start);
    }
    free(all);
    free(ps.records);
    return err ? em_error_prefix(err, "candidate '%s'", name) : NULL;
}

static em_status compare_run(em_stage *self, const em_run_context *ctx) {
    const em_model *ref = em_stage_input_artifact(self, "reference", 0)->data;
    const em_dataset *ds = em_stage_input_artifact(self, "data", 0)->data;
    em_mesh *mesh = em_stage_mesh(self, ctx);
    em_status err = em_stage_mesh_whole_windows(self, mesh, whole_windows);
    if (err) return err;
    em_metrics *m = em_metrics_new();
    m->world_size = mesh->dp;
    m->ranks = em_xcalloc((size_t)mesh->dp, sizeof *m->ranks);
    m->model_path = em_xstrdup(ref->path ? ref->path : "");
    m->model_header_sha256 = em_xstrdup(ref->header_sha256);
    m->model_digest = em_xstrdup(ref->digest);
    m->dataset_path = em_xstrdup(ds->path ? ds->path : "");
    m->dataset_sha256 = em_xstrdup(ds->sha256);
    for (size_t i = 0; i < em_stage_input_count(self, "candidates") && !err; i++)
        err = compare_one(self, ctx, ref, em_stage_input_artifact(self, "candidates", i)->data,
                          em_stage_input_producer(self, "candidates", i)->name, ds, mesh, m);
    if (err) {
        em_metrics_free(m);
        return err;
    }
    for (size_t i = 0; i < m->count; i++)
        em_log_debug("compare '%s': %s = %.17g", self->name, m->items[i].key, m->items[i].value);
    self->output = (em_artifact){.data = m, .free = free_metrics};
    return NULL;
}

static void compare_destroy(em_stage *self) {
    free(self->state);
}

const em_stage_kind em_stage_kind_compare = {
    .name = "compare",
    .summary = "a reference and candidate models over the same windows: per-token KL divergence, "
               "change of the target's probability, top-token agreement (llama.cpp's "
               "--kl-divergence statistics), identical on every rank",
    .produces = "metrics",
    .inputs = compare_inputs,
    .collective = true, /* over the mesh's dp group */
    .init = compare_init,
    .run = compare_run,
    .destroy = compare_destroy,
};
