/* Prometheus text exposition format 0.0.4 for a Pushgateway, and the Pushgateway's grouping URL.
 *
 * A metric "<stage>.<metric>" becomes the gauge evalmesh_<metric>{stage="<stage>"} (its standard
 * error, when there is one, evalmesh_<metric>_stderr{stage="<stage>"}); each rank's throughput is
 * evalmesh_rank_tokens_per_second{rank="<r>"}. Names are sanitized to Prometheus's rules: every
 * character outside [a-zA-Z0-9_:] becomes '_', and a leading digit gets a '_' before it. */
#ifndef EVALMESH_REPORT_PROMETHEUS_H
#define EVALMESH_REPORT_PROMETHEUS_H

#include <stddef.h>

#include "stages/metrics/metrics.h"

typedef struct em_prom_label {
    const char *name;
    const char *value;
} em_prom_label;

/* The exposition text of all metrics (heap string). Samples of one name are grouped under one
 * "# TYPE name gauge" line, names in order of first appearance. */
char *em_prometheus_text(const em_metrics *metrics);

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
