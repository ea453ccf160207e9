/* Test driver: runs a recipe's report and gate stages through the real stage graph and executor,
 * with a test-only stage kind `fixed_metrics` that produces a metrics artifact from its options,
 * so the tests know every value exactly:
 *   m: {kind: fixed_metrics, values: {f.token_ppl: [12.5, 0.25], f.bpb: 0.5},
 *       timing: [f.tokens_per_second], ranks: [[tokens, windows, seconds], ...],
 *       window_nll: [...], model: path, dataset: path}
 * usage: report_driver RECIPE RUN_DIR. RUN_DIR gets recipe.resolved.yaml (as `evalmesh run` writes
 * it); the log goes to stderr and RUN_DIR/evalmesh.log; the exit
 * status is the one `evalmesh run` documents (the first error's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runner/dag.h"
#include "runner/executor.h"
#include "runner/recipe/recipe.h"
#include "runner/recipe/schema.h"
#include "runner/run_dir.h"
#include "util/log.h"
#include "stages/metrics/metrics.h"

extern const em_stage_kind em_stage_kind_report;
extern const em_stage_kind em_stage_kind_gate;
extern const em_stage_kind em_stage_kind_calibrate;

static void free_metrics(void *m) {
    em_metrics_free(m);
}

static char *opt_dup(const em_node *map, const char *key) {
    const char *s = em_node_get_string(map, key, NULL);
    return s ? strdup(s) : NULL;
}

static em_status fixed_run(em_stage *self, const em_run_context *ctx) {
    em_metrics *m = em_metrics_new();
    self->output = (em_artifact){.data = m, .free = free_metrics};
    const em_node *values = em_node_get(self->options, "values");
    for (size_t i = 0; values && i < values->count; i++) {
        const em_node *v = values->entries[i].value;
        double x = 0, e = 0;
        if (v->kind == EM_NODE_SEQ) {
            em_node_as_double(v->items[0], &x);
            em_node_as_double(v->items[1], &e);
        } else {
            em_node_as_double(v, &x);
        }
        em_metric *it = em_metrics_set(m, values->entries[i].key, x);
        it->has_error = v->kind == EM_NODE_SEQ;
        it->error = e;
    }
    const em_node *timing = em_node_get(self->options, "timing");
    for (size_t i = 0; timing && i < timing->count; i++) {
        for (size_t j = 0; j < m->count; j++)
            if (strcmp(m->items[j].key, timing->items[i]->text) == 0) m->items[j].timing = true;
    }
    const em_node *ranks = em_node_get(self->options, "ranks");
    m->world_size = ranks ? (int)ranks->count : 0;
    m->ranks = calloc(m->world_size ? (size_t)m->world_size : 1, sizeof *m->ranks);
    for (int r = 0; r < m->world_size; r++) {
        int64_t tokens, windows;
        em_node_as_int(ranks->items[r]->items[0], &tokens);
        em_node_as_int(ranks->items[r]->items[1], &windows);
        m->ranks[r] = (em_rank_timing){.rank = r, .tokens = tokens, .windows = windows};
        em_node_as_double(ranks->items[r]->items[2], &m->ranks[r].seconds);
    }
    const em_node *nll = em_node_get(self->options, "window_nll");
    m->window_count = nll ? nll->count : 0;
    m->window_nll = calloc(m->window_count ? m->window_count : 1, sizeof(double));
    for (size_t i = 0; i < m->window_count; i++)
        em_node_as_double(nll->items[i], &m->window_nll[i]);
    m->model_path = opt_dup(self->options, "model");
    m->dataset_path = opt_dup(self->options, "dataset");
    m->model_header_sha256 = opt_dup(self->options, "model_sha256");
    m->model_digest = opt_dup(self->options, "model_digest");
    m->dataset_sha256 = opt_dup(self->options, "dataset_sha256");
    return NULL;
}

static const em_stage_kind fixed_metrics_kind = {
    .name = "fixed_metrics",
    .summary = "test-only: metrics given in the options",
    .produces = "metrics",
    .run = fixed_run,
};

/* calibrate: the producer of what the report's optional `calibrations` accepts */
static const em_stage_kind *const kinds[] = {&fixed_metrics_kind, &em_stage_kind_gate,
                                             &em_stage_kind_report, &em_stage_kind_calibrate, NULL};

/* Validates report and gate options against their (embedded) schemas, as the runner does. */
static em_status validate(em_node *stages) {
    for (size_t i = 0; i < stages->count; i++) {
        em_node *opts = stages->entries[i].value;
        const char *kind = em_node_get_string(opts, "kind", "");
        if (strcmp(kind, "report") != 0 && strcmp(kind, "gate") != 0) continue;
        char what[128];
        snprintf(what, sizeof what, "stage '%s'", stages->entries[i].key);
        em_status err = em_schema_validate_stage(opts, kind, what);
        if (err) return err;
    }
    return NULL;
}

static int fail(em_status err) {
    em_log_error("%s", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: report_driver RECIPE RUN_DIR\n");
        return 2;
    }
    em_log_init(0, 1);
    em_node *root;
    em_status err = em_recipe_load(argv[1], &root);
    if (err) return fail(err);
    em_node *stages = em_node_get(root, "stages");
    em_dag *dag = NULL;
    err = validate(stages);
    if (!err) err = em_dag_build(stages, kinds, &dag);
    em_run_context ctx = {.rank = 0,
                          .world_size = 1,
                          .local_size = 1,
                          .node_count = 1,
                          .recipe_name = em_node_get_string(root, "name", "test"),
                          .recipe = root};
    if (!err) err = em_executor_init(dag, &ctx);
    if (err) {
        em_dag_free(dag);
        em_node_free(root);
        return fail(err);
    }
    mkdir(argv[2], 0750);
    FILE *log = NULL;
    err = em_run_dir_write_recipe(argv[2], root); /* what `evalmesh push` reads back, as in a run */
    if (!err) err = em_run_dir_open_log(argv[2], 0, &log);
    if (err) {
        em_executor_finish(dag);
        em_dag_free(dag);
        em_node_free(root);
        return fail(err);
    }
    em_log_set_file(log);
    ctx.run_dir = argv[2];
    err = em_executor_run(dag, &ctx, 1, NULL);
    em_executor_finish(dag);
    em_dag_free(dag);
    int code = err ? fail(err) : 0;
    em_log_set_file(NULL);
    if (log) fclose(log);
    em_node_free(root);
    return code;
}
