/* Stage `gate`: regression checks on an aggregate stage's metrics — `max`, `min`, and
 * `max_increase_pct` / `max_decrease_pct` against a baseline (a results.json given by `baseline`,
 * or the last entry of a history file given by `baseline_history`), with `tolerance_sigma`
 * standard errors of slack (rules in stages/report/check.h). Rank 0 prints a table of the checks;
 * when any fails the stage returns an error with exit status 3, which the runner reports after
 * every other stage finished. Put `after: [<report stage>]` in the gate so the reports are
 * written and pushed before it runs.
 *
 * The baseline is read in init, before any stage runs, so `baseline_history` naming the history
 * file this run's report appends to compares against the previous run. A history that does not
 * exist yet or has no valid line (the first run of a series) skips the relative checks with a
 * warning; a `baseline` file that is missing or not a results document is an error (exit 2).
 * Relative paths are relative to the recipe file's folder. */
#include <stdlib.h>
#include <string.h>

#include "runner/stage.h"
#include "util/log.h"
#include "stages/metrics/metrics.h"
#include "stages/report/check.h"
#include "stages/report/history.h"
#include "stages/report/results.h"
#include "stages/report/textfile.h"

typedef struct gate_state {
    em_check *checks;
    size_t count;
    cJSON *baseline;     /* NULL: relative checks are skipped (or there are none) */
    char *baseline_from; /* file name (and line) for messages */
    double tolerance_sigma;
} gate_state;

static const char *const rule_options[] = {"max", "min", "max_increase_pct", "max_decrease_pct"};

static void gate_destroy(em_stage *self) {
    gate_state *st = self->state;
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) free(st->checks[i].key);
    free(st->checks);
    cJSON_Delete(st->baseline);
    free(st->baseline_from);
    free(st);
    self->state = NULL;
}

static em_status read_baseline(gate_state *st, const em_stage *self, bool relative,
                               const em_run_context *ctx) {
    const em_node *file = em_node_get(self->options, "baseline");
    const em_node *hist = em_node_get(self->options, "baseline_history");
    if (file && hist)
        return em_error_at(EM_EXIT_BAD_INPUT, hist->mark,
                           "stage '%s': give `baseline` or `baseline_history`, not both",
                           self->name);
    if (!file && !hist) return NULL;
    char *path = em_node_path(file ? file : hist);
    if (file) {
        em_status err = em_results_load(path, &st->baseline);
        if (err) {
            free(path);
            return em_error_prefix_at(err, file->mark, "stage '%s': baseline", self->name);
        }
        st->baseline_from = path;
        return NULL;
    }
    em_history h;
    em_status err = em_history_load(path, true, &h);
    if (err) {
        free(path);
        return em_error_prefix_at(err, hist->mark, "stage '%s'", self->name);
    }
    if (h.count == 0) {
        if (relative)
            em_log_warn("stage '%s': history %s has no run yet: relative checks skipped",
                        self->name, path);
    } else {
        st->baseline = cJSON_Duplicate(h.entries[h.count - 1], true);
        st->baseline_from = em_xasprintf("%s:%d", path, h.line_numbers[h.count - 1]);
    }
    em_history_free(&h);
    free(path);
    return NULL;
}

static em_status gate_init(em_stage *self, const em_run_context *ctx) {
    gate_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    st->tolerance_sigma = em_node_option_double(self->options, "tolerance_sigma");
    bool relative = false;
    for (int r = 0; r < 4; r++) {
        const em_node *map = em_node_get(self->options, rule_options[r]);
        if (!map) continue;
        if (map->kind != EM_NODE_MAP)
            return em_error_at(EM_EXIT_BAD_INPUT, map->mark,
                               "stage '%s': `%s` maps metric keys to numbers", self->name,
                               rule_options[r]);
        for (size_t i = 0; i < map->count; i++) {
            const em_map_entry *e = &map->entries[i];
            double limit;
            em_status err = em_node_as_double(e->value, &limit);
            if (err)
                return em_error_prefix(err, "stage '%s': %s.%s", self->name, rule_options[r],
                                       e->key);
            st->checks = em_xrealloc(st->checks, (st->count + 1) * sizeof *st->checks);
            st->checks[st->count++] = (em_check){.rule = (em_check_rule)r,
                                                 .key = em_xstrdup(e->key),
                                                 .limit = limit,
                                                 .mark = e->key_mark};
            if (r >= EM_CHECK_MAX_INCREASE_PCT) relative = true;
        }
    }
    if (st->count == 0)
        return em_error_at(EM_EXIT_BAD_INPUT, self->mark,
                           "stage '%s': no checks (give `max`, `min`, `max_increase_pct` or "
                           "`max_decrease_pct`)",
                           self->name);
    em_status err = read_baseline(st, self, relative, ctx);
    if (err) return err;
    if (relative && !st->baseline && !em_node_get(self->options, "baseline_history"))
        return em_error_at(EM_EXIT_BAD_INPUT, self->mark,
                           "stage '%s': relative checks need `baseline` or `baseline_history`",
                           self->name);
    return NULL;
}

static void free_verdict(void *v) {
    free(v);
}

static em_status gate_run(em_stage *self, const em_run_context *ctx) {
    gate_state *st = self->state;
    const em_artifact *in = em_stage_input_artifact(self, "metrics", 0);
    const em_metrics *m = in ? in->data : NULL;
    if (!m) return em_error_new(EM_EXIT_FAILURE, "stage '%s': no metrics input", self->name);
    em_verdict *v = em_xcalloc(1, sizeof *v);
    self->output = (em_artifact){.data = v, .free = free_verdict};

    em_check *done = em_xcalloc(st->count, sizeof *done);
    size_t n = 0;
    em_status first_fail = NULL;
    for (size_t i = 0; i < st->count; i++) {
        em_check *c = &st->checks[i];
        if (c->rule >= EM_CHECK_MAX_INCREASE_PCT && !st->baseline) continue; /* first run */
        em_status err =
            em_check_evaluate(c, m, st->baseline, st->baseline_from, st->tolerance_sigma);
        if (err) {
            free(done);
            return err;
        }
        done[n++] = *c;
        if (!c->passed && !first_fail)
            first_fail = em_error_new(
                EM_EXIT_GATE, "%s = %.8g is not %s %.8g (%s %.6g)", c->key, c->value,
                c->rule == EM_CHECK_MAX || c->rule == EM_CHECK_MAX_INCREASE_PCT ? "<=" : ">=",
                c->allowed, em_check_rule_name(c->rule), c->limit);
        if (!c->passed) v->failed++;
    }
    v->checks = n;
    char *table = em_check_table(done, n);
    em_log_summary("gate '%s'%s%s:\n%s", self->name, st->baseline ? " against " : "",
                   st->baseline ? st->baseline_from : "", table);
    free(table);
    free(done);
    if (!first_fail) {
        if (em_log_rank() == 0) em_log_info("gate '%s': %zu checks passed", self->name, n);
        return NULL;
    }
    return em_error_prefix(first_fail, "gate '%s': %zu of %zu checks failed; first", self->name,
                           v->failed, n);
}

static const em_input_spec gate_inputs[] = {
    {.option = "metrics", .accepts = {"metrics"}},
    {0},
};

const em_stage_kind em_stage_kind_gate = {
    .name = "gate",
    .summary = "regression checks on metrics (thresholds, change against a baseline); exit 3 "
               "when one fails",
    .produces = "verdict",
    .verdict = true,
    .inputs = gate_inputs,
    .collective = false,
    .init = gate_init,
    .run = gate_run,
    .destroy = gate_destroy,
};
