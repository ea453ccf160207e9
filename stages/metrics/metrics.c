/* The metrics artifact (see metrics.h): a growable list of named values plus the per-rank timings
 * and per-window NLLs the aggregate stage gathered. */
#include "stages/metrics/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "stages/metrics/metric_table.h"

em_metrics *em_metrics_new(void) {
    return em_xcalloc(1, sizeof(em_metrics));
}

void em_metrics_free(em_metrics *m) {
    if (!m) return;
    for (size_t i = 0; i < m->count; i++) free(m->items[i].key);
    free(m->items);
    free(m->ranks);
    free(m->window_nll);
    free(m->model_path);
    free(m->model_header_sha256);
    free(m->model_digest);
    free(m->dataset_path);
    free(m->dataset_sha256);
    free(m->source_stage);
    free(m->window_spec);
    em_example_values_free(m->examples);
    free(m->examples_file);
    free(m);
}

em_metric *em_metrics_set(em_metrics *m, const char *key, double value) {
    for (size_t i = 0; i < m->count; i++) {
        if (strcmp(m->items[i].key, key) == 0) {
            m->items[i].value = value;
            return &m->items[i];
        }
    }
    m->items = em_xrealloc(m->items, (m->count + 1) * sizeof *m->items);
    em_metric *item = &m->items[m->count++];
    memset(item, 0, sizeof *item);
    item->key = em_xstrdup(key);
    item->value = value;
    return item;
}

const em_metric *em_metrics_find(const em_metrics *m, const char *key) {
    for (size_t i = 0; i < m->count; i++)
        if (strcmp(m->items[i].key, key) == 0) return &m->items[i];
    return NULL;
}

em_metric *em_metrics_put(em_metrics *m, const char *stage, const char *name, double value) {
    const em_metric_def *def = em_metric_def_find(name);
    if (!def) {
        fprintf(stderr,
                "evalmesh: bug: metric '%s' of stage '%s' has no row in "
                "stages/metrics/metric_table.c\n",
                name, stage);
        exit(EM_EXIT_FAILURE);
    }
    char *key = em_xasprintf("%s.%s", stage, name);
    em_metric *metric = em_metrics_set(m, key, value);
    free(key);
    metric->timing = def->timing;
    return metric;
}

em_metric *em_metrics_put_with_error(em_metrics *m, const char *stage, const char *name,
                                     double value, double error) {
    em_metric *metric = em_metrics_put(m, stage, name, value);
    metric->error = error;
    metric->has_error = true;
    size_t at = (size_t)(metric - m->items); /* setting another metric may move the items */
    const char *error_metric = em_metric_def_find(name)->error;
    if (error_metric) em_metrics_put(m, stage, error_metric, error);
    return &m->items[at];
}
