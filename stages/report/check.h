/* Regression checks of the gate stage, one per metric and rule (value: the candidate's metric,
 * base: the baseline's, d = value - base, e: the standard error of d, k: tolerance_sigma):
 *   max                 value <= limit
 *   min                 value >= limit
 *   max_increase_pct    value <= base + |base| * limit / 100 + k * e
 *   max_decrease_pct    value >= base - |base| * limit / 100 - k * e
 *   max_increase_sigma  d <= limit * e  (the bound is on d; with e = 0 it is d <= 0)
 *   max_decrease_sigma  d >= -limit * e (with e = 0 it is d >= 0)
 *   mcnemar_p           not (b > c and p < limit): McNemar's exact p-value (stages/metrics/
 *                       mcnemar.h) of the b examples only the baseline got right and the c only
 *                       the candidate did; a task metric with 0/1 values paired by example only
 * e is paired when both runs scored the same tokens and the metric derives from them (its row of
 * stages/metrics/metric_table.c says how: nll_mean, token_ppl, word_ppl, byte_ppl, bits_per_byte,
 * token_accuracy of the paired forward stage): the standard error of the per-token differences
 * (paired_stats.h) carried to the metric's scale, d(exp(S/K)) = value * dS/K for the perplexities,
 * dS/K (/ ln 2) for nll_mean and bits_per_byte, S the NLL sum over K tokens, words or bytes.
 * For a task stage's metric that is a mean over its examples (acc, acc_norm,
 * multiple_choice_grade, ...) e is paired when both runs kept the values of the same examples
 * (stages/metrics/example_values.h): the standard error of the per-example differences.
 * Otherwise it is unpaired, sqrt(error^2 + base_error^2) as if the runs were independent (a metric
 * without an error contributes 0), and the check's message says why. So k is how many standard
 * errors of the measured change the change may exceed the threshold by before the check fails: with
 * paired errors a small slack, since both runs share the tokens' difficulty. A NaN value fails
 * every check. */
#ifndef EVALMESH_REPORT_CHECK_H
#define EVALMESH_REPORT_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "util/error.h"
#include "stages/metrics/metrics.h"
#include "stages/metrics/paired_stats.h"

typedef enum em_check_rule {
    EM_CHECK_MAX,
    EM_CHECK_MIN,
    EM_CHECK_MAX_INCREASE_PCT,
    EM_CHECK_MAX_DECREASE_PCT,
    EM_CHECK_MAX_INCREASE_SIGMA,
    EM_CHECK_MAX_DECREASE_SIGMA,
    EM_CHECK_MCNEMAR_P,
    EM_CHECK_RULES
} em_check_rule;

typedef enum em_comparison {
    EM_COMPARE_ABSOLUTE, /* max, min: no baseline */
    EM_COMPARE_PAIRED,
    EM_COMPARE_UNPAIRED,
} em_comparison;

typedef struct em_check {
    em_check_rule rule;
    char *key;    /* metric key "<stage>.<metric>" */
    double limit; /* as written in the recipe */
    em_mark mark; /* where the check is written */
    /* filled by em_check_evaluate */
    double value;
    double base; /* baseline value (relative rules) */
    em_comparison comparison;
    double difference, difference_error; /* value - base and e (relative rules) */
    double allowed;   /* the bound: on the value, on the difference for the sigma rules, on the
                         p-value for mcnemar_p */
    int64_t examples; /* paired by example: how many; 0 otherwise */
    double p_value;   /* mcnemar_p: McNemar's exact p */
    int64_t baseline_only, candidate_only; /* mcnemar_p: the discordant examples b and c */
    bool passed;
    char *message; /* heap: "KEY = V is not <= B (RULE LIMIT, paired)" */
} em_check;

/* What the gate found when it paired a task metric's examples with the baseline's (one check's
 * key "<stage>/<task>.<metric>"). */
typedef struct em_example_pairing {
    const char *why;         /* not paired: why, for the messages; NULL when paired */
    int64_t count;           /* the paired examples */
    double difference_error; /* the standard error of the mean of cand - base per example */
    int64_t baseline_only, candidate_only; /* examples only the baseline / the candidate got
                                              right (0/1 values) */
    const char *not_binary; /* a value other than 0 and 1 (for mcnemar_p's refusal), or NULL */
} em_example_pairing;

/* What the gate found when it paired this run's tokens with the baseline's. */
typedef struct em_check_pairing {
    const char *stage; /* the paired forward stage; NULL: not paired */
    em_paired_stats stats;
    int64_t tokens, words, bytes; /* the paired stage's counts (words, bytes: 0 when unknown) */
    const char *unpaired_why;     /* when not paired: why, for the messages */
    const em_example_pairing *examples; /* the check's task metric by example, or NULL */
} em_check_pairing;

/* The artifact of a gate stage: every check and what it was compared against. */
typedef struct em_verdict {
    char *stage; /* the gate stage's name */
    bool passed;
    em_check *checks; /* owned (keys, messages) */
    size_t count, failed;
    cJSON *baseline; /* the gate section's "baseline" object; NULL: none */
    bool paired;
    em_paired_stats paired_stats;
    char *paired_stage;
    int64_t paired_tokens;
    /* when paired: each window's mean NLL of candidate and baseline, in window order */
    size_t paired_windows;
    double *candidate_window_nll, *baseline_window_nll;
} em_verdict;

/* The rule's option name in a gate stage ("max", "max_increase_pct", ...). */
const char *em_check_rule_name(em_check_rule rule);
/* Whether the rule compares with a baseline (every rule but max and min) rather than with its
 * limit alone. */
bool em_check_rule_relative(em_check_rule rule);

/* Evaluates c against the metrics (and baseline for the relative rules; pairing may be NULL:
 * unpaired). A metric absent from metrics or baseline is an error (exit 2) naming the check's
 * place and `source` (the baseline's file name) and listing the keys that exist; so is mcnemar_p
 * on a metric not paired by example or with values other than 0 and 1. */
em_status em_check_evaluate(em_check *c, const em_metrics *metrics, const cJSON *baseline,
                            const char *source, double tolerance_sigma,
                            const em_check_pairing *pairing);

/* The table of evaluated checks: check, value, difference ± error, bound, PASS/FAIL (heap). */
char *em_check_table(const em_check *checks, size_t count);

/* The results document's "gate" section for v (schemas/results.schema.json). */
cJSON *em_verdict_json(const em_verdict *v);
void em_verdict_free(em_verdict *v);

#endif
