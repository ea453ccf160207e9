/* Prometheus text exposition format 0.0.4 for a Pushgateway, and the Pushgateway's grouping URL.
 *
 * The exposition is read from the results document (schemas/results.schema.json), so a push says
 * what results.json says. One group per recipe: the grouping key is job and recipe (plus the
 * recipe's own `labels`), and every series carries the run's provenance as labels
 *   model="<model path>" model_sha256="<header sha256>" dataset="<dataset path>" commit="<commit>"
 * (a null one is left out), so a PUT replaces the previous run of the same recipe whatever model
 * it scored. The series, one gauge per quantity:
 *   evalmesh_<metric>{stage}                 each metric "<stage>.<metric>"
 *   evalmesh_<metric>_stderr{stage}          its standard error, when it has one (the metric
 *                                            that its row of stages/metrics/metric_table.c
 *                                            names as its error, e.g. "<stage>.token_ppl_se",
 *                                            is that same error and is left out)
 *   evalmesh_rank_tokens_per_second{rank}    each rank's throughput
 *   evalmesh_gate_passed{gate}               1 or 0, from the document's `gate` section
 *   evalmesh_gate_check_<q>{gate,metric,rule,comparison}  per check, q one of value, baseline,
 *                                            threshold, bound, difference, difference_stderr,
 *                                            passed (a null quantity is left out)
 *   evalmesh_last_success_timestamp_seconds  the run's end time, only when the gate passed or
 *                                            there is no gate section
 * Names are sanitized to Prometheus's rules: every character outside [a-zA-Z0-9_:] becomes '_',
 * and a leading digit gets a '_' before it. Values that are null in the document are NaN. */
#ifndef EVALMESH_REPORT_PROMETHEUS_H
#define EVALMESH_REPORT_PROMETHEUS_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

typedef struct em_prom_label {
    const char *name;
    const char *value;
} em_prom_label;

/* The exposition text of a results document (heap string). Samples of one name are grouped under
 * one "# TYPE name gauge" line, names in order of first appearance. */
char *em_prometheus_text(const cJSON *results);

/* Whether evalmesh sets this label inside the series (model, model_sha256, dataset, commit,
 * stage, rank, gate, metric, rule, comparison) or the Pushgateway does (job, instance): such a
 * name cannot also be a grouping label. */
bool em_prometheus_reserved_label(const char *name);

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. */
char *em_prometheus_metric_name(const char *s);
/* Label names: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved). */
char *em_prometheus_label_name(const char *s);

/* base_url + "/metrics/job/<job>/<label>/<value>...": names sanitized, values percent-encoded,
 * or "<label>@base64/<url-safe base64>" when a value is empty or contains '/'. Labels with a NULL
 * value are left out. A trailing '/' of base_url is dropped. */
char *em_prometheus_group_url(const char *base_url, const char *job, const em_prom_label *labels,
                              size_t count);

#endif
