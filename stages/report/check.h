/* Regression checks of the gate stage, one per metric and rule:
 *   max               value <= limit
 *   min               value >= limit
 *   max_increase_pct  value - base <= |base| * limit / 100 + k * sqrt(error^2 + base_error^2)
 *   max_decrease_pct  base - value <= |base| * limit / 100 + k * sqrt(error^2 + base_error^2)
 * where base is the metric in a baseline results document and k the tolerance in standard
 * errors (a metric without an error contributes 0). A NaN value fails every check. */
#ifndef EVALMESH_REPORT_CHECK_H
#define EVALMESH_REPORT_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "util/error.h"
#include "stages/metrics/metrics.h"

typedef enum em_check_rule {
    EM_CHECK_MAX,
    EM_CHECK_MIN,
    EM_CHECK_MAX_INCREASE_PCT,
    EM_CHECK_MAX_DECREASE_PCT,
} em_check_rule;

typedef struct em_check {
    em_check_rule rule;
    char *key;    /* metric key "<stage>.<metric>" */
    double limit; /* as written in the recipe */
    em_mark mark; /* where the check is written */
    /* filled by em_check_evaluate */
    double value;
    double base;    /* baseline value (relative rules) */
    double allowed; /* the bound value was compared against */
    bool passed;
} em_check;

/* The artifact of a gate stage. */
typedef struct em_verdict {
    size_t checks;
    size_t failed;
} em_verdict;

const char *em_check_rule_name(em_check_rule rule);

/* Evaluates c against the metrics (and baseline for the relative rules). A metric absent from
 * metrics or baseline is an error (exit 2) naming the check's place and `source` (the baseline's
 * file name) and listing the keys that exist. */
em_status em_check_evaluate(em_check *c, const em_metrics *metrics, const cJSON *baseline,
                            const char *source, double tolerance_sigma);

/* The table of evaluated checks: check, value, bound, PASS/FAIL (heap string). */
char *em_check_table(const em_check *checks, size_t count);

#endif
