/* Stage `aggregate`: global metrics from the forward stages' scores, identical on
 * every rank. For each input stage S it reduces over the mesh's dp group (hierarchically: inside
 * each node, then across nodes; every tp x cp group holds the same scores, so each dp group sees
 * every window once):
 *   exact fixed-point sums (runner/comm/exact_sum.h) of nll and nll^2, and int64 counts of
 *   scored tokens, windows, words, bytes and correct argmax predictions,
 * and sets the metrics S.token_ppl (with its standard error), S.token_ppl_se, S.nll_mean,
 * S.word_ppl, S.byte_ppl, S.bits_per_byte (when the dataset counted words and bytes),
 * S.token_accuracy and the counts S.tokens, S.windows, S.words and S.bytes (the last two
 * when the protocol counts them). Integer sums are
 * associative, so these are the same bits for any world size, rank order or reduction tree.
 *
 * It also gathers every rank's tokens, windows and forward seconds (the timing metrics
 * S.seconds, S.tokens_per_second, S.rank_tokens_per_second_min/_max, S.slowest_rank,
 * S.fastest_rank, timings in the metric table because they depend on the machine) and the mean
 * NLL of every window of the first input, in window order, for the report's histogram. With
 * `print_estimate: true` rank 0 prints llama.cpp's running "[1]X,[2]Y,..." line (first input)
 * and its "Final estimate: PPL = X +/- Y" line (each input).
 *
 * Every metric is a row of stages/metrics/metric_table.c. Produces a "metrics" artifact
 * (em_metrics, stages/metrics/metrics.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "runner/comm/comm.h"
#include "runner/comm/exact_sum.h"
#include "runner/comm/mesh_groups.h"
#include "runner/stage.h"
#include "util/log.h"
#include "stages/kinds/support/mesh_checks.h"
#include "stages/metrics/metrics.h"
#include "stages/metrics/nll_stats.h"
#include "stages/kinds/support/scores.h"

/* Counts reduced with one int64 all-reduce. */
enum { COUNT_TOKENS, COUNT_WINDOWS, COUNT_WORDS, COUNT_BYTES, COUNT_CORRECT, COUNT_N };

/* What each rank tells the others about its own work. */
typedef struct rank_work {
    int64_t tokens;
    int64_t windows;
    double seconds;
} rank_work;

/* The exact totals of one scores artifact over all ranks, and its metrics. */
static em_status reduce_scores(const em_scores *s, const char *stage, em_mesh *mesh,
                               em_metrics *m) {
    em_exact_sum sums[2] = {s->nll, s->nll2};
    int64_t counts[COUNT_N] = {0};
    counts[COUNT_CORRECT] = s->correct;
    counts[COUNT_TOKENS] = (int64_t)s->token_count;
    counts[COUNT_WINDOWS] = (int64_t)s->window_count;
    for (size_t w = 0; w < s->window_count; w++) {
        counts[COUNT_WORDS] += s->windows[w].words;
        counts[COUNT_BYTES] += s->windows[w].bytes;
    }
    em_status err = em_mesh_dp_exact_sum_allreduce(mesh, sums, 2);
    if (!err) err = em_mesh_dp_allreduce(mesh, counts, counts, COUNT_N, EM_DTYPE_INT64, EM_OP_SUM);
    if (err) return err;
    if (sums[0].invalid || sums[1].invalid)
        return em_error_new(EM_EXIT_RUNTIME,
                            "stage '%s' produced %lld NLL values that are NaN, infinite or too "
                            "large",
                            stage, (long long)sums[0].invalid);
    if (counts[COUNT_TOKENS] == 0)
        return em_error_new(EM_EXIT_RUNTIME, "stage '%s' scored no token on any rank", stage);

    em_nll_totals t = {.sum_nll = em_exact_sum_value(&sums[0]),
                       .sum_nll2 = em_exact_sum_value(&sums[1]),
                       .tokens = counts[COUNT_TOKENS],
                       .words = counts[COUNT_WORDS],
                       .bytes = counts[COUNT_BYTES],
                       .correct = counts[COUNT_CORRECT]};
    em_nll_stats st = em_nll_stats_compute(&t);
    if (st.has_se) /* and its error metric token_ppl_se */
        em_metrics_put_with_error(m, stage, "token_ppl", st.token_ppl, st.token_ppl_se);
    else
        em_metrics_put(m, stage, "token_ppl", st.token_ppl);
    em_metrics_put(m, stage, "nll_mean", st.nll_mean);
    if (st.has_words) em_metrics_put(m, stage, "word_ppl", st.word_ppl);
    if (st.has_bytes) {
        em_metrics_put(m, stage, "byte_ppl", st.byte_ppl);
        em_metrics_put(m, stage, "bits_per_byte", st.bits_per_byte);
    }
    em_metrics_put(m, stage, "token_accuracy", st.token_accuracy);
    em_metrics_put(m, stage, "tokens", (double)t.tokens);
    em_metrics_put(m, stage, "windows", (double)counts[COUNT_WINDOWS]);
    if (t.words) em_metrics_put(m, stage, "words", (double)t.words);
    if (t.bytes) em_metrics_put(m, stage, "bytes", (double)t.bytes);
    return NULL;
}

/* Gathers the work of every rank of the dp group on s; sets the timing metrics and adds into
 * m->ranks (one entry per dp rank, named by its world rank). */
static em_status gather_work(const em_scores *s, const char *stage, em_comm *dp, em_metrics *m) {
    rank_work mine = {(int64_t)s->token_count, (int64_t)s->window_count, s->seconds};
    rank_work *all = em_xcalloc((size_t)dp->size, sizeof *all);
    em_status err = em_allgather(dp, &mine, all, sizeof mine);
    if (err) {
        free(all);
        return err;
    }
    double max_seconds = 0;
    int64_t total = 0;
    int slowest = -1, fastest = -1;
    double slow_rate = 0, fast_rate = 0;
    for (int r = 0; r < dp->size; r++) {
        m->ranks[r].rank = dp->world_ranks[r];
        m->ranks[r].tokens += all[r].tokens;
        m->ranks[r].windows += all[r].windows;
        m->ranks[r].seconds += all[r].seconds;
        total += all[r].tokens;
        if (all[r].seconds > max_seconds) max_seconds = all[r].seconds;
        if (all[r].tokens == 0 || all[r].seconds <= 0) continue; /* idle ranks have no rate */
        double rate = (double)all[r].tokens / all[r].seconds;
        if (slowest < 0 || rate < slow_rate) slowest = dp->world_ranks[r], slow_rate = rate;
        if (fastest < 0 || rate > fast_rate) fastest = dp->world_ranks[r], fast_rate = rate;
    }
    free(all);
    em_metrics_put(m, stage, "seconds", max_seconds);
    if (max_seconds > 0) em_metrics_put(m, stage, "tokens_per_second", (double)total / max_seconds);
    if (slowest >= 0) {
        em_metrics_put(m, stage, "slowest_rank", slowest);
        em_metrics_put(m, stage, "rank_tokens_per_second_min", slow_rate);
        em_metrics_put(m, stage, "fastest_rank", fastest);
        em_metrics_put(m, stage, "rank_tokens_per_second_max", fast_rate);
    }
    return NULL;
}

/* Every window's mean NLL, in window order, on every rank. Each dp rank holds a contiguous range
 * of windows and dp ranks are in window order, so the blocks are concatenated by dp rank. With
 * `print_running`, rank 0 also prints llama.cpp's running estimate after each window:
 * "[1]5.1234,[2]5.3012,..." (the perplexity of the windows so far). */
static em_status gather_window_nll(const em_scores *s, em_comm *dp, em_metrics *m,
                                   bool print_running) {
    int64_t mine = (int64_t)s->window_count;
    int64_t *counts = em_xcalloc((size_t)dp->size, sizeof *counts);
    em_status err = em_allgather(dp, &mine, counts, sizeof mine);
    int64_t most = 0, total = 0;
    for (int r = 0; r < dp->size && !err; r++) {
        if (counts[r] > most) most = counts[r];
        total += counts[r];
    }
    /* Equal blocks of `most` (mean NLL, scored tokens) pairs, allgather's shape; each rank
     * fills the front of its own. */
    size_t pairs = (size_t)(most ? most : 1);
    double *block = em_xcalloc(2 * pairs, sizeof *block);
    double *all = em_xcalloc((size_t)dp->size * 2 * pairs, sizeof *all);
    for (size_t w = 0; w < s->window_count; w++) {
        const em_window_score *ws = &s->windows[w];
        block[2 * w] = ws->token_count ? ws->nll_sum / ws->token_count : 0;
        block[2 * w + 1] = ws->token_count;
    }
    if (!err && most) err = em_allgather(dp, block, all, 2 * pairs * sizeof *block);
    if (!err) {
        m->window_nll = em_xcalloc((size_t)(total ? total : 1), sizeof *m->window_nll);
        m->window_count = (size_t)total;
        size_t next = 0;
        double nll = 0, tokens = 0;
        for (int r = 0; r < dp->size; r++) {
            for (int64_t i = 0; i < counts[r]; i++) {
                const double *pair = &all[((size_t)r * pairs + (size_t)i) * 2];
                m->window_nll[next++] = pair[0];
                nll += pair[0] * pair[1];
                tokens += pair[1];
                if (print_running && tokens > 0)
                    em_log_summary("[%zu]%.4f,", next, exp(nll / tokens));
            }
        }
        if (print_running) em_log_summary("\n");
    }
    free(block);
    free(all);
    free(counts);
    return err;
}

static char *copy_or_null(const char *s) {
    return s ? em_xstrdup(s) : NULL;
}

/* The options of the dataset stage behind `forward` (its `data` input) that decide which windows
 * it scores, as a JSON object of their scalar texts; NULL when forward reads no dataset stage. */
static char *window_spec(const em_stage *forward) {
    static const char *const skip[] = {"kind", "tokenizer", "mesh", "path", "after"};
    const em_stage *data = em_stage_input_producer(forward, "data", 0);
    if (!data || !data->options || data->options->kind != EM_NODE_MAP) return NULL;
    cJSON *spec = cJSON_CreateObject();
    for (size_t i = 0; i < data->options->count; i++) {
        const em_map_entry *e = &data->options->entries[i];
        bool skipped = e->value->kind != EM_NODE_SCALAR;
        for (size_t k = 0; k < sizeof skip / sizeof *skip; k++) skipped |= !strcmp(e->key, skip[k]);
        if (!skipped) cJSON_AddStringToObject(spec, e->key, e->value->text);
    }
    char *text = cJSON_PrintUnformatted(spec);
    cJSON_Delete(spec);
    char *copy = em_xstrdup(text);
    cJSON_free(text);
    return copy;
}

static void free_metrics(void *data) {
    em_metrics_free(data);
}

/* The sums are over the dp group of the mesh the inputs were computed on, so that is the mesh to
 * name (a different one would count windows twice or miss some). */
static em_status aggregate_init(em_stage *self, const em_run_context *ctx) {
    (void)ctx;
    return em_stage_check_inputs_mesh(self, "inputs");
}

static em_status aggregate_run(em_stage *self, const em_run_context *ctx) {
    em_mesh *mesh = em_stage_mesh(self, ctx);
    em_metrics *m = em_metrics_new();
    m->world_size = mesh->dp;
    m->ranks = em_xcalloc((size_t)mesh->dp, sizeof *m->ranks);
    em_status err = NULL;
    bool print = em_node_option_bool(self->options, "print_estimate");
    size_t n = em_stage_input_count(self, "inputs");
    for (size_t i = 0; i < n && !err; i++) {
        const em_scores *s = em_stage_input_artifact(self, "inputs", i)->data;
        const char *stage = em_stage_input_producer(self, "inputs", i)->name;
        err = reduce_scores(s, stage, mesh, m);
        if (!err) err = gather_work(s, stage, mesh->dp_group, m);
        if (!err && i == 0) {
            err = gather_window_nll(s, mesh->dp_group, m, print);
            m->model_path = copy_or_null(s->model_path);
            m->model_header_sha256 = copy_or_null(s->model_header_sha256);
            m->model_digest = copy_or_null(s->model_digest);
            m->dataset_path = copy_or_null(s->dataset_path);
            m->dataset_sha256 = copy_or_null(s->dataset_sha256);
            m->precision = s->precision;
            const em_stage *forward = em_stage_input_producer(self, "inputs", 0);
            m->source_stage = em_xstrdup(forward->name);
            m->window_spec = window_spec(forward);
        }
    }
    if (err) {
        em_metrics_free(m);
        return err;
    }
    for (size_t i = 0; i < n && print; i++) {
        char key[256];
        snprintf(key, sizeof key, "%s.token_ppl", em_stage_input_producer(self, "inputs", i)->name);
        const em_metric *ppl = em_metrics_find(m, key);
        em_log_summary("Final estimate: PPL = %.4f +/- %.5f\n", ppl->value, ppl->error);
    }
    for (size_t i = 0; i < m->count; i++) {
        const em_metric *x = &m->items[i];
        if (!x->timing) em_log_debug("aggregate '%s': %s = %.17g", self->name, x->key, x->value);
    }
    self->output = (em_artifact){.data = m, .free = free_metrics};
    return NULL;
}

static const em_input_spec aggregate_inputs[] = {
    {"inputs", {"scores"}, true, false},
    {"mesh", {"mesh"}, false, true},
    {0},
};

const em_stage_kind em_stage_kind_aggregate = {
    .name = "aggregate",
    .summary = "Exact global perplexity metrics from forward scores, identical on every rank",
    .produces = "metrics",
    .inputs = aggregate_inputs,
    .collective = true,
    .init = aggregate_init,
    .run = aggregate_run,
};
