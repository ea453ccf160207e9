/* From the scores of an example's requests to its metrics, and from the examples' metrics to a
 * task's, as lm-evaluation-harness 0.4 computes them (lm_eval/api/task.py process_results,
 * lm_eval/api/metrics.py mean and mean_stderr): every rank holds every example's numbers and
 * folds them in document order, so the results are the same bits on any number of ranks. */
#ifndef EVALMESH_TASKS_TASK_SCORING_H
#define EVALMESH_TASKS_TASK_SCORING_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/tasks/task.h"

/* The scores of one example: per choice the continuation's log-likelihood sum and whether every
 * continuation token was the argmax; with acc_mutual_info also the unconditional sums. */
typedef struct em_example_scores {
    const double *loglik;        /* choice_count */
    const bool *greedy;          /* choice_count */
    const double *unconditional; /* choice_count, or NULL */
} em_example_scores;

/* One example's metric values (those the task asks for) and its prediction. */
typedef struct em_example_outcome {
    int prediction;      /* argmax of the sums (first on ties); BIG-bench: its tie rule */
    int prediction_norm; /* argmax of the sums per character of the choice */
    double acc, acc_norm, acc_mutual_info, multiple_choice_grade;
    double exact_match;   /* the gold continuation is greedy; generate_until: the filtered
                             answer matches a target (exact_match, exact_str_match) */
    double loglikelihood; /* EM_TASK_LOGLIKELIHOOD: the target's sum */
} em_example_outcome;

void em_example_outcome_of(const em_task *task, const em_task_example *example,
                           const em_example_scores *scores, em_example_outcome *out);

/* The metrics a task reports, one row per metric: its name (lm-eval's), the task's flag, and how
 * an outcome gives its per-example value. A task's metric is the mean over its examples with
 * lm-eval's mean_stderr, except perplexity: exp(-mean loglikelihood), without a standard error
 * (lm-eval bootstraps it). */
typedef struct em_task_metric_row {
    const char *name;
    unsigned flag; /* EM_TASK_METRIC_* */
    double (*value)(const em_example_outcome *o);
    bool exp_of_negative_mean; /* perplexity */
} em_task_metric_row;

extern const em_task_metric_row em_task_metric_rows[];
extern const size_t em_task_metric_row_count;

/* The row named `name`, or NULL. */
const em_task_metric_row *em_task_metric_find(const char *name);

/* A metric over n values in document order: the mean (sum left to right, over n) and the
 * standard error sqrt(sum (x - mean)^2 / (n - 1)) / sqrt(n) (NaN when n < 2), as lm-eval's
 * mean and mean_stderr compute them in Python. */
void em_task_mean_stderr(const double *values, size_t n, double *mean, double *stderr_out);

#endif
