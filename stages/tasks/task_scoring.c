/* An example's and a task's metrics as lm-evaluation-harness computes them (task_scoring.h). */
#include "stages/tasks/task_scoring.h"

#include <math.h>
#include <string.h>

#include "stages/tasks/bigbench_scoring.h"

/* The first index of the largest of v (n): numpy's argmax. */
static int argmax(const double *v, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return (int)best;
}

/* Python's len() of a UTF-8 string: its code points. */
static double characters(const char *s) {
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) n += (*c & 0xc0) != 0x80;
    return (double)n;
}

void em_example_outcome_of(const em_task *task, const em_task_example *example,
                           const em_example_scores *scores, em_example_outcome *out) {
    memset(out, 0, sizeof *out);
    size_t n = example->choice_count;
    double normalized[n], informed[n];
    for (size_t i = 0; i < n; i++) {
        normalized[i] = scores->loglik[i] / characters(example->choices[i]);
        informed[i] = scores->unconditional ? scores->loglik[i] - scores->unconditional[i] : 0;
    }
    out->prediction = argmax(scores->loglik, n);
    out->prediction_norm = argmax(normalized, n);
    int gold = example->gold;
    if (task->format == EM_TASK_FORMAT_BIGBENCH) { /* BIG-bench's choice, with its tie rule */
        size_t chosen = 0;
        out->multiple_choice_grade =
            em_bigbench_grade(example, scores->loglik, task->absolute_normalization, &chosen);
        out->prediction = (int)chosen;
    } else {
        out->multiple_choice_grade =
            example->target_scores ? example->target_scores[out->prediction] : 0;
    }
    out->acc = out->prediction == gold;
    out->acc_norm = out->prediction_norm == gold;
    out->acc_mutual_info = scores->unconditional && argmax(informed, n) == gold;
    out->exact_match = gold >= 0 && scores->greedy[gold];
    out->loglikelihood = scores->loglik[0];
    if (task->output == EM_TASK_LOGLIKELIHOOD) out->acc = scores->greedy[0];
}

static double acc(const em_example_outcome *o) {
    return o->acc;
}
static double acc_norm(const em_example_outcome *o) {
    return o->acc_norm;
}
static double acc_mutual_info(const em_example_outcome *o) {
    return o->acc_mutual_info;
}
static double multiple_choice_grade(const em_example_outcome *o) {
    return o->multiple_choice_grade;
}
static double exact_match(const em_example_outcome *o) {
    return o->exact_match;
}
static double loglikelihood(const em_example_outcome *o) {
    return o->loglikelihood;
}

const em_task_metric_row em_task_metric_rows[] = {
    {"acc", EM_TASK_METRIC_ACC, acc, false},
    {"acc_norm", EM_TASK_METRIC_ACC_NORM, acc_norm, false},
    {"acc_mutual_info", EM_TASK_METRIC_ACC_MUTUAL_INFO, acc_mutual_info, false},
    {"multiple_choice_grade", EM_TASK_METRIC_MULTIPLE_CHOICE_GRADE, multiple_choice_grade, false},
    {"exact_match", EM_TASK_METRIC_EXACT_MATCH, exact_match, false},
    {"exact_str_match", EM_TASK_METRIC_EXACT_STR_MATCH, exact_match, false},
    {"loglikelihood", EM_TASK_METRIC_LOGLIKELIHOOD, loglikelihood, false},
    {"perplexity", EM_TASK_METRIC_PERPLEXITY, loglikelihood, true},
};
const size_t em_task_metric_row_count = sizeof em_task_metric_rows / sizeof *em_task_metric_rows;

const em_task_metric_row *em_task_metric_find(const char *name) {
    for (size_t i = 0; i < em_task_metric_row_count; i++)
        if (strcmp(em_task_metric_rows[i].name, name) == 0) return &em_task_metric_rows[i];
    return NULL;
}

void em_task_mean_stderr(const double *values, size_t n, double *mean, double *stderr_out) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += values[i];
    double mu = n ? sum / (double)n : NAN;
    *mean = mu;
    if (n < 2) {
        *stderr_out = NAN;
        return;
    }
    double squares = 0;
    for (size_t i = 0; i < n; i++) squares += (values[i] - mu) * (values[i] - mu);
    *stderr_out = sqrt(squares / (double)(n - 1)) / sqrt((double)n);
}
