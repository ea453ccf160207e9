/* A task run's results as lm-evaluation-harness presents them: per task its metrics with their
 * standard errors, printed as lm-eval's table (Tasks, Version, Filter, n-shot, Metric, Value,
 * Stderr) and written as its results document ({"results": {task: {"acc,none": ...,
 * "acc_stderr,none": ...}}, "n-shot": ..., "versions": ..., "n-samples": ...}, where a
 * generate_until task's filter name stands for none); and per example one line of a samples
 * file like lm-eval's --log_samples. */
#ifndef EVALMESH_TASKS_TASK_RESULTS_H
#define EVALMESH_TASKS_TASK_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util/error.h"
#include "stages/tasks/task.h"
#include "stages/tasks/task_scoring.h"

typedef struct em_task_metric_value {
    const em_task_metric_row *row;
    double value, stderr_value; /* stderr NaN: none (lm-eval's N/A) */
} em_task_metric_value;

typedef struct em_task_result {
    const em_task *task;
    em_task_metric_value metrics[8];
    size_t metric_count;
} em_task_result;

/* A group's metrics: every metric its member tasks share, lm-eval's size-weighted mean of the
 * members' values and their pooled standard error (lm_eval/api/metrics.py
 * pooled_sample_stderr). */
typedef struct em_task_group_result {
    const char *name;
    em_task_metric_value metrics[8];
    size_t metric_count;
    size_t example_count;
} em_task_group_result;

/* The groups of results (count), in the order their first member comes: *groups (*group_count),
 * freed by the caller (free). */
void em_task_groups_of(const em_task_result *results, size_t count, em_task_group_result **groups,
                       size_t *group_count);

/* The metrics task asks for, over its examples' outcomes (example_count, document order). */
void em_task_result_of(const em_task *task, const em_example_outcome *outcomes,
                       em_task_result *out);

/* lm-eval's markdown table of the results. */
void em_task_results_print(const em_task_result *results, size_t count,
                           const em_task_group_result *groups, size_t group_count, FILE *out);
/* lm-eval's results document (malloc'd JSON text). */
char *em_task_results_json(const em_task_result *results, size_t count,
                           const em_task_group_result *groups, size_t group_count);

/* One samples-file line (malloc'd JSON text, no newline) for an example: the document, its
 * target, every request's (context, continuation) and (loglikelihood, is_greedy), and its metric
 * values. requests (choice_count) are the example's conditional ones. */
char *em_task_sample_json(const em_task *task, const em_task_example *example,
                          const em_example_scores *scores, const em_example_outcome *outcome);

/* One samples-file line (malloc'd JSON text, no newline) for a generate_until example, as
 * lm-eval's --log_samples writes one: the document, its target (a list for several), the request
 * (context, until, max_gen_toks), the generated text (resps), the filtered answer
 * (filtered_resps), the filter's name and the metric values. */
char *em_task_generation_sample_json(const em_task *task, const em_task_example *example,
                                     const char *generated, const char *answer,
                                     const em_example_outcome *outcome);

#endif
