/* The metrics evalmesh computes, one row per metric: its unit, which direction is better, whether
 * it is a timing (it depends on the machine), how the gate pairs it with a baseline and which
 * metric is its standard error. A metric key is "<stage>.<name>"; its row is found by name. The
 * producers (stages/kinds/aggregate.c, compare.c) set only metrics that have a row; the readers
 * (results, history, checks, Prometheus) take these properties from the row, never from the
 * name's spelling. Adding a metric is adding a row in metric_table.c (and computing it). */
#ifndef EVALMESH_METRICS_METRIC_TABLE_H
#define EVALMESH_METRICS_METRIC_TABLE_H

#include <stdbool.h>

typedef enum em_metric_direction {
    EM_BETTER_LOWER,
    EM_BETTER_HIGHER,
} em_metric_direction;

/* How the gate's relative checks pair a metric with the baseline's. A paired metric derives from
 * the paired forward stage's per-token records: S is their NLL sum over K (tokens, words or
 * bytes, em_metric_per), and the check's error is the standard error of the per-token
 * differences carried to the metric's scale (stages/report/check.h). Any other metric is
 * compared unpaired, as if the two runs were independent. */
typedef enum em_metric_pairing {
    EM_PAIRING_NONE,
    EM_PAIRING_NLL_MEAN,     /* factor * S / K */
    EM_PAIRING_NLL_EXP_MEAN, /* exp(S / K) */
    EM_PAIRING_ACCURACY,     /* the share of tokens whose argmax is the target */
} em_metric_pairing;

typedef enum em_metric_per {
    EM_PER_TOKEN,
    EM_PER_WORD,
    EM_PER_BYTE,
} em_metric_per;

typedef struct em_metric_def {
    const char *name; /* the <name> of "<stage>.<name>" */
    const char *unit;
    em_metric_direction better;
    bool timing; /* depends on the machine (seconds, tokens/s): not part of exact comparisons */
    em_metric_pairing pairing;
    em_metric_per per; /* K of a paired NLL metric */
    double factor;     /* EM_PAIRING_NLL_MEAN: the metric is factor * S / K */
    const char *error; /* the metric that holds this one's standard error, or NULL */
} em_metric_def;

/* The row of a metric name, or NULL. */
const em_metric_def *em_metric_def_find(const char *name);
/* The row of a key "<stage>.<name>" (split at its first dot), or NULL. */
const em_metric_def *em_metric_def_of_key(const char *key);
/* The row whose standard error the metric `name` holds, or NULL. */
const em_metric_def *em_metric_def_error_of(const char *name);

/* Whether a larger value of the metric of key "<stage>.<name>" is better (accuracy, agreement,
 * throughput): finds the best run of a history. A key without a row: lower is better. */
bool em_metric_higher_is_better(const char *key);

#endif
