/* The per-example values of a task stage's metrics, kept so that a gate can pair a candidate's
 * examples with its baseline's (stages/kinds/gate.c): per task (and per group of tasks: its
 * members' examples one after another), in document order, each example's
 * identity (its document index and the sha256 of its requests' texts) and, per metric that is a
 * mean over the examples (acc, acc_norm, multiple_choice_grade, ...), the example's value. The
 * task stage attaches them to its metrics artifact and writes them to the run directory
 * (stages/report/example_file.h). */
#ifndef EVALMESH_METRICS_EXAMPLE_VALUES_H
#define EVALMESH_METRICS_EXAMPLE_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One metric's value for every example of a task. */
typedef struct em_example_column {
    char *metric;   /* "acc", "acc_norm", ... */
    bool binary;    /* every value is 0 or 1 by the metric's definition (not partial credit) */
    double *values; /* (example count) */
} em_example_column;

/* One task's examples. */
typedef struct em_example_set {
    char *key;          /* "<stage>/<task>": the prefix of its metrics' keys */
    size_t count;       /* examples */
    int64_t *doc;       /* (count) document index in the task's file */
    char (*sha256)[65]; /* (count) sha256 of the example's requests' texts, hex */
    em_example_column *columns;
    size_t column_count;
} em_example_set;

typedef struct em_example_values {
    char *stage; /* the task stage */
    em_example_set *sets;
    size_t count;
} em_example_values;

em_example_values *em_example_values_new(const char *stage);
void em_example_values_free(em_example_values *v);
/* Adds a set of count examples for key (doc and sha256 zeroed, no columns); returns it. */
em_example_set *em_example_values_add_set(em_example_values *v, const char *key, size_t count);
/* Adds a column for metric (values zeroed); returns it. */
em_example_column *em_example_set_add_column(em_example_set *set, const char *metric, bool binary);

/* Adds a set under key that holds the sets v->sets[members[i]] (member_count, each with every
 * one of metrics) one after another, with their columns of metrics (metric_count; binary when
 * every member's is); returns it. */
em_example_set *em_example_values_add_concatenation(em_example_values *v, const char *key,
                                                    const size_t *members, size_t member_count,
                                                    const char *const *metrics,
                                                    size_t metric_count);

/* The set whose key is the first key_len bytes of key, or NULL. */
const em_example_set *em_example_values_find(const em_example_values *v, const char *key,
                                             size_t key_len);
/* The column of metric in set, or NULL. */
const em_example_column *em_example_set_column(const em_example_set *set, const char *metric);

/* Whether base and cand hold the same examples in the same order: NULL when they do, else the
 * first difference in words (heap), e.g. "example 3 differs (doc 3 with requests sha256
 * 0a1b2c3d4e5f in the baseline, doc 3 with 9f8e7d6c5b4a in this run)". */
char *em_example_set_difference(const em_example_set *base, const em_example_set *cand);

#endif
