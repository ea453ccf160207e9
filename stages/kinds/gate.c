/* Stage `gate`: regression checks on an aggregate or task stage's metrics — `max`, `min`, and
 * `max_increase_pct` / `max_decrease_pct` / `max_increase_sigma` / `max_decrease_sigma` /
 * `mcnemar_p` against a baseline run (rules and errors in stages/report/check.h). The baseline is
 *   baseline: FILE          a results document (its token or example file relative to its
 *                           folder),
 *   baseline: {pin: DIR}    a run directory (DIR/results.json and its token or example file), or
 *   baseline_history: FILE  the last run of a history that passed its gate or had none (a failed
 *                           run is recorded but never becomes the baseline).
 * When the baseline kept its per-token scores (a token file, stages/report/token_file.h) and
 * this run's window records are complete, the two are paired token by token: the same dataset
 * file, the same window options and, window by window, the same targets — otherwise the gate
 * refuses (exit 2, naming the difference) unless `unpaired: allow`, which compares the aggregates
 * as if independent. Without the baseline's tokens the comparison is unpaired and each check's
 * message says why. The differences are summed exactly (runner/comm/exact_sum.h), so a run
 * identical to its baseline differs by exactly 0.
 * A task stage's metrics are paired example by example instead: when the baseline kept its
 * per-example values (an example file, stages/report/example_file.h, named in its "examples")
 * and has the check's task with the same examples in the same order (document index and the
 * sha256 of each example's requests), the check's e is the paired standard error of the
 * per-example differences, and `mcnemar_p` tests the discordant examples of a 0/1 metric;
 * other examples are refused (exit 2, naming the first differing example) unless
 * `unpaired: allow`. Either way a baseline of another `precision` (results.json's
 * model.precision; exact when absent) is refused, naming both, unless `unpaired: allow`.
 *
 * The stage produces an em_verdict (stages/report/check.h) whether or not the checks pass; a
 * report stage given `verdict: <gate>` records it in results.json and the history. A failed check
 * is a deferred verdict: every other stage still runs, then the run exits 3 with the first failed
 * check's message. Rank 0 prints the table of checks.
 *
 * The baseline document is read in init, before any stage runs, so `baseline_history` naming the
 * history this run's report appends to compares against an earlier run. A history that does not
 * exist yet or has no run that can be a baseline skips the relative checks with a warning; a
 * `baseline` file that is missing or not a results document is an error (exit 2). Relative paths
 * are relative to the recipe file's folder. */
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/exact_sum.h"
#include "runner/stage.h"
#include "util/log.h"
#include "stages/metrics/metrics.h"
#include "stages/metrics/paired_stats.h"
#include "stages/report/check.h"
#include "stages/report/example_file.h"
#include "stages/report/history.h"
#include "stages/report/results.h"
#include "stages/report/strbuf.h"
#include "stages/report/textfile.h"
#include "stages/report/token_file.h"

typedef struct gate_state {
    em_check *checks;
    size_t count;
    bool relative;        /* some check needs a baseline */
    cJSON *baseline;      /* NULL: relative checks are skipped (or there are none) */
    char *baseline_from;  /* file name (and line) for messages */
    cJSON *baseline_info; /* the gate section's "baseline" object */
    char *tokens_path;    /* the baseline's token file, or NULL */
    char *tokens_sha256;
    char *examples_path; /* the baseline's example file, or NULL */
    char *examples_sha256;
    double tolerance_sigma;
    bool unpaired_allowed;
} gate_state;

static void gate_destroy(em_stage *self) {
    gate_state *st = self->state;
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) {
        free(st->checks[i].key);
        free(st->checks[i].message);
    }
    free(st->checks);
    cJSON_Delete(st->baseline);
    cJSON_Delete(st->baseline_info);
    free(st->baseline_from);
    free(st->tokens_path);
    free(st->tokens_sha256);
    free(st->examples_path);
    free(st->examples_sha256);
    free(st);
    self->state = NULL;
}

static const char *doc_string(const cJSON *doc, const char *object, const char *key) {
    const cJSON *o = object ? cJSON_GetObjectItemCaseSensitive(doc, object) : doc;
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* The path (relative to folder) and sha256 of the file doc's section names, or false. */
static bool named_file(const cJSON *doc, const char *section, const char *folder, char **path,
                       char **sha256) {
    const char *file = doc_string(doc, section, "file");
    const char *sha = doc_string(doc, section, "sha256");
    if (!file || !sha) return false;
    *path = file[0] == '/' ? em_xstrdup(file) : em_textfile_join(folder, file);
    *sha256 = em_xstrdup(sha);
    return true;
}

/* Takes doc as the baseline: the "baseline" object of the gate section and, when the document
 * names a token file or an example file, its path (relative to folder) and sha256. */
static void take_baseline(gate_state *st, cJSON *doc, char *from, const char *why,
                          const char *folder) {
    st->baseline = doc;
    st->baseline_from = from;
    cJSON *info = cJSON_CreateObject();
    cJSON_AddStringToObject(info, "source", from);
    cJSON_AddStringToObject(info, "why", why);
    const char *end = doc_string(doc, NULL, "end_time"),
               *commit = doc_string(doc, "evalmesh", "commit");
    end ? (void)cJSON_AddStringToObject(info, "end_time", end)
        : (void)cJSON_AddNullToObject(info, "end_time");
    commit ? (void)cJSON_AddStringToObject(info, "commit", commit)
           : (void)cJSON_AddNullToObject(info, "commit");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(doc, "model");
    cJSON_AddItemToObject(info, "model",
                          model ? cJSON_Duplicate(model, true) : cJSON_CreateObject());
    cJSON_AddFalseToObject(info, "paired");
    st->baseline_info = info;
    named_file(doc, "tokens", folder, &st->tokens_path, &st->tokens_sha256);
    named_file(doc, "examples", folder, &st->examples_path, &st->examples_sha256);
}

static char *folder_of(const char *path) {
    char *copy = em_xstrdup(path);
    char *dir = em_xstrdup(dirname(copy));
    free(copy);
    return dir;
}

static em_status read_results_baseline(gate_state *st, const em_stage *self, const em_node *at,
                                       char *path, const char *why, const char *folder) {
    cJSON *doc;
    em_status err = em_results_load(path, &doc);
    if (err) {
        free(path);
        return em_error_prefix_at(err, at->mark, "stage '%s': baseline", self->name);
    }
    take_baseline(st, doc, path, why, folder);
    return NULL;
}

static em_status read_baseline(gate_state *st, const em_stage *self) {
    const em_node *file = em_node_get(self->options, "baseline");
    const em_node *hist = em_node_get(self->options, "baseline_history");
    if (file && hist)
        return em_error_at(EM_EXIT_BAD_INPUT, hist->mark,
                           "stage '%s': give `baseline` or `baseline_history`, not both",
                           self->name);
    if (!file && !hist) return NULL;
    if (file && file->kind == EM_NODE_MAP) { /* {pin: RUN_DIR} */
        const em_node *pin = em_node_get(file, "pin");
        char *dir = em_node_path(pin);
        char *path = em_textfile_join(dir, "results.json");
        em_status err = read_results_baseline(st, self, pin, em_xstrdup(path), "pinned", dir);
        if (!err) {
            free(st->baseline_from);
            st->baseline_from = em_xstrdup(dir);
            cJSON_ReplaceItemInObject(st->baseline_info, "source", cJSON_CreateString(dir));
        }
        free(path);
        free(dir);
        return err;
    }
    if (file) {
        char *path = em_node_path(file);
        char *folder = folder_of(path);
        em_status err = read_results_baseline(st, self, file, path, "baseline file", folder);
        free(folder);
        return err;
    }
    char *path = em_node_path(hist);
    em_history h;
    em_status err = em_history_load(path, true, &h);
    if (err) {
        free(path);
        return em_error_prefix_at(err, hist->mark, "stage '%s'", self->name);
    }
    long chosen = em_history_baseline(&h);
    if (chosen < 0) {
        if (st->relative)
            em_log_warn("stage '%s': history %s has no run yet%s: relative checks skipped",
                        self->name, path, h.count ? " that passed its gate" : "");
    } else {
        char *folder = folder_of(path);
        take_baseline(st, cJSON_Duplicate(h.entries[chosen], true),
                      em_xasprintf("%s:%d", path, h.line_numbers[chosen]),
                      "last passing run of the history", folder);
        free(folder);
    }
    em_history_free(&h);
    free(path);
    return NULL;
}

static em_status gate_init(em_stage *self, const em_run_context *ctx) {
    (void)ctx;
    gate_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    st->tolerance_sigma = em_node_option_double(self->options, "tolerance_sigma");
    st->unpaired_allowed = strcmp(em_node_option_string(self->options, "unpaired"), "allow") == 0;
    for (int r = 0; r < EM_CHECK_RULES; r++) {
        const em_node *map = em_node_get(self->options, em_check_rule_name((em_check_rule)r));
        if (!map) continue;
        if (map->kind != EM_NODE_MAP)
            return em_error_at(EM_EXIT_BAD_INPUT, map->mark,
                               "stage '%s': `%s` maps metric keys to numbers", self->name,
                               em_check_rule_name((em_check_rule)r));
        for (size_t i = 0; i < map->count; i++) {
            const em_map_entry *e = &map->entries[i];
            double limit;
            em_status err = em_node_as_double(e->value, &limit);
            if (err)
                return em_error_prefix(err, "stage '%s': %s.%s", self->name,
                                       em_check_rule_name((em_check_rule)r), e->key);
            st->checks = em_xrealloc(st->checks, (st->count + 1) * sizeof *st->checks);
            st->checks[st->count++] = (em_check){.rule = (em_check_rule)r,
                                                 .key = em_xstrdup(e->key),
                                                 .limit = limit,
                                                 .mark = e->key_mark};
            if (em_check_rule_relative((em_check_rule)r)) st->relative = true;
        }
    }
    if (st->count == 0) {
        em_strbuf rules = {0};
        for (int r = 0; r < EM_CHECK_RULES; r++) {
            const char *sep = r == 0 ? "" : r + 1 < EM_CHECK_RULES ? ", " : " or ";
            em_strbuf_printf(&rules, "%s`%s`", sep, em_check_rule_name((em_check_rule)r));
        }
        char *names = em_strbuf_take(&rules);
        em_status err = em_error_at(EM_EXIT_BAD_INPUT, self->mark,
                                    "stage '%s': no checks (give %s)", self->name, names);
        free(names);
        return err;
    }
    em_status err = read_baseline(st, self);
    if (err) return err;
    if (st->relative && !st->baseline && !em_node_get(self->options, "baseline_history"))
        return em_error_at(EM_EXIT_BAD_INPUT, self->mark,
                           "stage '%s': relative checks need `baseline` or `baseline_history`",
                           self->name);
    return NULL;
}

static void free_verdict(void *v) {
    em_verdict_free(v);
}

/* Exact totals of the per-token differences cand - base (the same windows), and each window's
 * mean NLL of both into the verdict. */
static em_paired_totals pair_tokens(const em_token_set *base, const em_token_set *cand,
                                    em_verdict *v) {
    em_exact_sum d, d2;
    em_exact_sum_init(&d);
    em_exact_sum_init(&d2);
    em_paired_totals t = {.tokens = (int64_t)cand->token_count};
    v->paired_windows = cand->window_count;
    v->candidate_window_nll = em_xcalloc(cand->window_count + 1, sizeof(double));
    v->baseline_window_nll = em_xcalloc(cand->window_count + 1, sizeof(double));
    size_t at = 0;
    for (size_t w = 0; w < cand->window_count; w++) {
        double sum_c = 0, sum_b = 0;
        int32_t n = cand->window_tokens[w];
        for (int32_t k = 0; k < n; k++, at++) {
            double diff = cand->nll[at] - base->nll[at];
            em_exact_sum_add(&d, diff);
            em_exact_sum_add(&d2, diff * diff);
            int64_t c = (int64_t)cand->correct[at] - (int64_t)base->correct[at];
            t.sum_c += c;
            t.sum_c2 += c * c;
            sum_c += cand->nll[at];
            sum_b += base->nll[at];
        }
        v->candidate_window_nll[w] = n ? sum_c / n : 0;
        v->baseline_window_nll[w] = n ? sum_b / n : 0;
    }
    t.sum_d = em_exact_sum_value(&d);
    t.sum_d2 = em_exact_sum_value(&d2);
    return t;
}

static int64_t metric_count(const em_metrics *m, const char *stage, const char *name) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", stage, name);
    const em_metric *x = em_metrics_find(m, key);
    return x ? (int64_t)x->value : 0;
}

/* How this run's precision differs from the baseline's (heap), NULL when it does not or this run
 * does not say. A baseline older than the `precision` option ran exact. */
static char *precision_difference(const gate_state *st, const em_metrics *m) {
    const char *base_precision = doc_string(st->baseline, "model", "precision");
    if (!base_precision) base_precision = "exact";
    if (!m->precision || strcmp(base_precision, m->precision) == 0) return NULL;
    return em_xasprintf("the precision differs (%s in the baseline, %s in this run)",
                        base_precision, m->precision);
}

/* Pairs this run's tokens with the baseline's when both exist and match: fills pairing (stage
 * NULL and *why set when unpaired). A mismatch is an error (exit 2) unless `unpaired: allow`. */
static em_status try_pairing(em_stage *self, const em_metrics *m, const em_run_context *ctx,
                             em_verdict *v, em_check_pairing *pairing, char **why) {
    gate_state *st = self->state;
    const char *base_ds = doc_string(st->baseline, "dataset", "sha256");
    char *differ = NULL;
    if (base_ds && m->dataset_sha256 && strcmp(base_ds, m->dataset_sha256) != 0)
        differ = em_xasprintf("the dataset file differs (sha256 %.12s in the baseline, %.12s in "
                              "this run)",
                              base_ds, m->dataset_sha256);
    if (!differ) differ = precision_difference(st, m);
    em_token_set base = {0}, cand = {0};
    em_status err = NULL;
    if (!differ && !st->tokens_path)
        *why = em_xasprintf("the baseline %s kept no per-token scores", st->baseline_from);
    if (!differ && st->tokens_path) {
        err = em_token_file_read(st->tokens_path, st->tokens_sha256, &base);
        if (err) {
            *why = em_xasprintf("the baseline's token file is unusable: %s", err->message);
            em_error_free(err);
            err = NULL;
        }
    }
    if (!differ && !*why) {
        em_records_key key =
            em_records_key_of(m->model_digest, m->dataset_sha256, ctx->recipe_sha256, m->precision);
        bool complete = false;
        char *incomplete = NULL;
        if (ctx->run_dir && m->source_stage)
            err = em_token_set_from_records(ctx->run_dir, m->source_stage, &key, m->window_spec,
                                            (size_t)metric_count(m, m->source_stage, "windows"),
                                            &cand, &complete, &incomplete);
        if (!err && !complete)
            *why = em_xasprintf("this run has no complete window records%s%s",
                                incomplete ? ": " : "", incomplete ? incomplete : "");
        free(incomplete);
        if (!err && complete) differ = em_token_set_difference(&base, &cand);
    }
    if (!err && differ && !st->unpaired_allowed)
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "stage '%s': refusing to compare with the baseline %s: %s (a paired "
                           "comparison needs the same windows; give `unpaired: allow` to compare "
                           "the aggregates as if independent, or pin a baseline scored on these "
                           "windows)",
                           self->name, st->baseline_from, differ);
    else if (!err && differ)
        *why = em_xasprintf("the windows differ: %s (unpaired: allow)", differ);
    if (!err && !*why) {
        em_paired_totals t = pair_tokens(&base, &cand, v);
        v->paired = true;
        v->paired_stage = em_xstrdup(cand.stage);
        v->paired_tokens = t.tokens;
        v->paired_stats = em_paired_stats_compute(&t);
        *pairing = (em_check_pairing){.stage = v->paired_stage,
                                      .stats = v->paired_stats,
                                      .tokens = t.tokens,
                                      .words = metric_count(m, cand.stage, "words"),
                                      .bytes = metric_count(m, cand.stage, "bytes")};
        cJSON_ReplaceItemInObject(st->baseline_info, "paired", cJSON_CreateTrue());
    }
    free(differ);
    em_token_set_free(&base);
    em_token_set_free(&cand);
    return err;
}

/* The baseline's per-example values for a task stage's metrics: *out, or NULL and *why (heap)
 * when it kept none or its example file is unusable. */
static void read_baseline_examples(const gate_state *st, em_example_values **out, char **why) {
    *out = NULL;
    *why = NULL;
    if (!st->examples_path) {
        *why = em_xasprintf("the baseline %s kept no per-example values", st->baseline_from);
        return;
    }
    em_status err = em_example_file_read(st->examples_path, st->examples_sha256, out);
    if (err) {
        *why = em_xasprintf("the baseline's example file is unusable: %s", err->message);
        em_error_free(err);
    }
}

/* The exact mean's error of cand - base over the examples of set, and the discordant counts of
 * 0/1 values (*not_binary, heap, says why the metric is not 0/1: a column not 0/1 by definition,
 * or the first value that is neither). */
static void pair_values(const em_example_set *set, const em_example_column *base_column,
                        const em_example_column *cand_column, em_example_pairing *ep,
                        char **not_binary) {
    const double *base = base_column->values, *cand = cand_column->values;
    if (!base_column->binary || !cand_column->binary)
        *not_binary = em_xasprintf("%s values of it may be other than 0 and 1, as a partial "
                                   "credit",
                                   !cand_column->binary ? "this run's" : "the baseline's");
    em_exact_sum d, d2;
    em_exact_sum_init(&d);
    em_exact_sum_init(&d2);
    for (size_t i = 0; i < set->count; i++) {
        double diff = cand[i] - base[i];
        em_exact_sum_add(&d, diff);
        em_exact_sum_add(&d2, diff * diff);
        bool b = base[i] == 0 || base[i] == 1, c = cand[i] == 0 || cand[i] == 1;
        if ((!b || !c) && !*not_binary)
            *not_binary =
                em_xasprintf("example %zu (doc %lld) has %.6g in %s", i, (long long)set->doc[i],
                             b ? cand[i] : base[i], b ? "this run" : "the baseline");
        ep->baseline_only += base[i] == 1 && cand[i] == 0;
        ep->candidate_only += base[i] == 0 && cand[i] == 1;
    }
    double mean;
    ep->count = (int64_t)set->count;
    em_paired_mean_error(em_exact_sum_value(&d), em_exact_sum_value(&d2), ep->count, &mean,
                         &ep->difference_error);
}

/* Pairs check key's task metric ("<stage>/<task>.<metric>") example by example with base (NULL:
 * base_why says why not): *ep, with ep->why (heap, into *why) when unpaired. Examples that differ
 * are an error (exit 2) unless `unpaired: allow`. */
static em_status pair_examples(const em_stage *self, const em_metrics *m,
                               const em_example_values *base, const char *base_why, const char *key,
                               em_example_pairing *ep, char **why, char **not_binary) {
    const gate_state *st = self->state;
    *ep = (em_example_pairing){0};
    const char *dot = strrchr(key, '.');
    const em_example_set *cand =
        dot ? em_example_values_find(m->examples, key, (size_t)(dot - key)) : NULL;
    if (!cand) {
        *why = em_xasprintf("this run kept no per-example values of %s", key);
        ep->why = *why;
        return NULL;
    }
    const char *metric = dot + 1;
    const em_example_column *cand_values = em_example_set_column(cand, metric);
    const em_example_set *base_set =
        base ? em_example_values_find(base, key, (size_t)(dot - key)) : NULL;
    char *differ = base_set ? em_example_set_difference(base_set, cand) : NULL;
    const em_example_column *base_values =
        base_set ? em_example_set_column(base_set, metric) : NULL;
    em_status err = NULL;
    if (!cand_values)
        *why = em_xasprintf("%s is not a mean over the examples", metric);
    else if (!base)
        *why = em_xstrdup(base_why);
    else if (!base_set)
        *why = em_xasprintf("the baseline's example file has no task %.*s", (int)(dot - key), key);
    else if (differ && !st->unpaired_allowed)
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "stage '%s': refusing to compare %s with the baseline %s: in task "
                           "%.*s %s (a paired comparison needs the same examples; give `unpaired: "
                           "allow` to compare the aggregates as if independent, or pin a baseline "
                           "scored on these examples)",
                           self->name, key, st->baseline_from, (int)(dot - key), key, differ);
    else if (differ)
        *why = em_xasprintf("the examples differ: %s (unpaired: allow)", differ);
    else if (!base_values)
        *why = em_xasprintf("the baseline kept no per-example values of %s", metric);
    else
        pair_values(cand, base_values, cand_values, ep, not_binary);
    free(differ);
    ep->why = *why;
    ep->not_binary = *not_binary;
    return err;
}

static em_status gate_run(em_stage *self, const em_run_context *ctx) {
    gate_state *st = self->state;
    const em_artifact *in = em_stage_input_artifact(self, "metrics", 0);
    const em_metrics *m = in ? in->data : NULL;
    if (!m) return em_error_new(EM_EXIT_FAILURE, "stage '%s': no metrics input", self->name);
    em_verdict *v = em_xcalloc(1, sizeof *v);
    self->output = (em_artifact){.data = v, .free = free_verdict};
    v->stage = em_xstrdup(self->name);
    v->checks = em_xcalloc(st->count, sizeof *v->checks);

    em_check_pairing pairing = {0};
    char *why = NULL, *base_why = NULL;
    em_example_values *base_examples = NULL;
    bool by_example = false;
    if (st->relative && st->baseline && m->examples) {
        char *differ = precision_difference(st, m);
        if (differ && !st->unpaired_allowed) {
            em_status err = em_error_new(EM_EXIT_BAD_INPUT,
                                         "stage '%s': refusing to compare with the baseline %s: %s "
                                         "(a paired comparison needs the same precision; give "
                                         "`unpaired: allow` to compare the aggregates as if "
                                         "independent, or pin a baseline of this precision)",
                                         self->name, st->baseline_from, differ);
            free(differ);
            return err;
        }
        if (differ)
            base_why = em_xasprintf("%s (unpaired: allow)", differ);
        else
            read_baseline_examples(st, &base_examples, &base_why);
        free(differ);
        if (base_why && em_log_rank() == 0)
            em_log_warn("gate '%s': unpaired comparison: %s", self->name, base_why);
    } else if (st->relative && st->baseline) {
        em_status err = try_pairing(self, m, ctx, v, &pairing, &why);
        if (err) return err;
        pairing.unpaired_why = why;
        if (why && em_log_rank() == 0)
            em_log_warn("gate '%s': unpaired comparison: %s", self->name, why);
    }
    if (st->baseline) v->baseline = cJSON_Duplicate(st->baseline_info, true);
    const em_check *first_fail = NULL;
    for (size_t i = 0; i < st->count; i++) {
        em_check *c = &st->checks[i];
        if (em_check_rule_relative(c->rule) && !st->baseline) continue; /* first run */
        em_example_pairing ep;
        char *ep_why = NULL, *not_binary = NULL;
        bool task_metric = m->examples && em_check_rule_relative(c->rule);
        em_status err = NULL;
        if (task_metric)
            err =
                pair_examples(self, m, base_examples, base_why, c->key, &ep, &ep_why, &not_binary);
        pairing.examples = task_metric ? &ep : NULL;
        if (!err)
            err = em_check_evaluate(c, m, st->baseline, st->baseline_from, st->tolerance_sigma,
                                    &pairing);
        if (task_metric && !ep.why) by_example = true;
        free(ep_why);
        free(not_binary);
        if (err) {
            free(why);
            free(base_why);
            em_example_values_free(base_examples);
            return err;
        }
        em_check *copy = &v->checks[v->count++];
        *copy = *c;
        copy->key = em_xstrdup(c->key);
        copy->message = em_xstrdup(c->message);
        if (!c->passed) {
            v->failed++;
            if (!first_fail) first_fail = copy;
        }
    }
    free(why);
    free(base_why);
    em_example_values_free(base_examples);
    if (by_example) cJSON_ReplaceItemInObject(v->baseline, "paired", cJSON_CreateTrue());
    v->passed = v->failed == 0;
    char *table = em_check_table(v->checks, v->count);
    em_log_summary("gate '%s'%s%s%s:\n%s", self->name, st->baseline ? " against " : "",
                   st->baseline ? st->baseline_from : "",
                   v->paired    ? " (paired token by token)"
                   : by_example ? " (paired example by example)"
                                : "",
                   table);
    free(table);
    if (!first_fail) {
        if (em_log_rank() == 0) em_log_info("gate '%s': %zu checks passed", self->name, v->count);
        return NULL;
    }
    self->verdict_failure =
        em_error_new(EM_EXIT_GATE, "gate '%s': %zu of %zu checks failed; first: %s", self->name,
                     v->failed, v->count, first_fail->message);
    return NULL;
}

static const em_input_spec gate_inputs[] = {
    {.option = "metrics", .accepts = {"metrics"}},
    {0},
};

const em_stage_kind em_stage_kind_gate = {
    .name = "gate",
    .summary = "regression checks on metrics (thresholds, change against a baseline, paired token "
               "by token when it can be); exit 3 when one fails",
    .produces = "verdict",
    .verdict = true,
    .inputs = gate_inputs,
    .collective = false,
    .init = gate_init,
    .run = gate_run,
    .destroy = gate_destroy,
};
