/* The metrics artifact: global metrics of a run, identical on every rank, produced by the
 * aggregate stage and read by report and gate. Metric keys are "<stage>.<metric>", e.g.
 * "f_ref.token_ppl". */
#ifndef EVALMESH_METRICS_H
#define EVALMESH_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/metrics/example_values.h"

typedef struct em_metric {
    char *key; /* "<stage>.<metric>" */
    double value;
    double error; /* standard error, when has_error */
    bool has_error;
    bool timing; /* depends on the machine (seconds, tokens/s): not part of exact comparisons */
} em_metric;

typedef struct em_rank_timing {
    int rank;
    int64_t tokens; /* scored tokens this rank computed */
    int64_t windows;
    double seconds; /* time in forward on this rank */
} em_rank_timing;

typedef struct em_metrics {
    em_metric *items;
    size_t count;
    em_rank_timing *ranks; /* world_size entries: one per rank of the dp group */
    int world_size;
    double *window_nll; /* mean NLL of every window, in window order (for histograms) */
    size_t window_count;
    char *model_path; /* provenance for reports; NULL when unknown */
    char *model_header_sha256;
    char *model_digest; /* the model's content digest (loaded_model.h) */
    char *dataset_path;
    char *dataset_sha256;
    /* how the forward rounded its products ("exact", "ggml", "bf16"; a static name), NULL when
     * unknown */
    const char *precision;
    /* The stage that computed the first input's scores (its window records are
     * <run_dir>/records/<source_stage>.rank*.bin) and, as a JSON object of strings, the options of
     * its dataset stage that decide the windows (protocol, n_ctx, stride, ...); NULL when unknown.
     * A paired comparison (stages/kinds/gate.c) needs both to match a baseline's. */
    char *source_stage;
    char *window_spec;
    /* A task stage's per-example values (example_values.h), for a gate to pair by example, and
     * the file it wrote them to, relative to the run directory (stages/report/example_file.h);
     * NULL when not a task stage's metrics (examples_file: or when the run has no directory). */
    em_example_values *examples;
    char *examples_file;
} em_metrics;

em_metrics *em_metrics_new(void);
void em_metrics_free(em_metrics *m);
/* Adds (or replaces) a metric; returns it. */
em_metric *em_metrics_set(em_metrics *m, const char *key, double value);
const em_metric *em_metrics_find(const em_metrics *m, const char *key);
/* Sets the metric "<stage>.<name>" of a row of the metric table (stages/metrics/metric_table.h),
 * flagged timing as its row says; returns it. A name without a row is a bug in evalmesh: it is
 * printed and the process exits with status 1. */
em_metric *em_metrics_put(em_metrics *m, const char *stage, const char *name, double value);
/* The same with its standard error; when the row names an error metric, that metric is set to
 * the error too. */
em_metric *em_metrics_put_with_error(em_metrics *m, const char *stage, const char *name,
                                     double value, double error);

#endif
