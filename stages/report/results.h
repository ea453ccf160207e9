/* The results document (schemas/results.schema.json): what one run measured and on what, as JSON.
 * The report stage writes it to <run_dir>/results.json, history files hold one per line, webhooks
 * receive it, and the gate reads it back as a baseline. Layout:
 *   {"schema": "evalmesh.results/1",
 *    "recipe": {"name", "sha256"}, "model": {"path", "header_sha256"},
 *    "dataset": {"path", "sha256"}, "evalmesh": {"version", "commit"},
 *    "world_size", "mesh": {"nodes", "ranks_per_node"}, "start_time", "end_time" (UTC, ISO 8601),
 *    "metrics": {"<stage>": {"<metric>": {"value", "error"?, "timing"?}}},
 *    "calibration": {"<stage>": {"dataset", "windows", "window_tokens", "tokens", "tensors"}}
 *    (added by the report stage, when it names calibrate stages),
 *    "ranks": [{"rank", "tokens", "windows", "seconds", "tokens_per_second"}]}
 * A metric key "<stage>.<metric>" is split at its first dot. Values that are not finite are null.
 */
#ifndef EVALMESH_REPORT_RESULTS_H
#define EVALMESH_REPORT_RESULTS_H

#include <stdbool.h>
#include <time.h>

#include <cJSON.h>

#include "util/error.h"
#include "stages/metrics/metrics.h"

#define EM_RESULTS_SCHEMA_ID "evalmesh.results/1"

/* What the run knows besides the metrics. NULL strings become null in the document. */
typedef struct em_results_info {
    const char *recipe_name;
    const char *recipe_sha256; /* of the resolved recipe written as YAML */
    int world_size;
    int node_count;
    int ranks_per_node;
    time_t start_time;
    time_t end_time;
} em_results_info;

/* Builds the document (the caller frees it with cJSON_Delete). */
cJSON *em_results_build(const em_metrics *metrics, const em_results_info *info);

/* The document as JSON text (heap, free with free()) whose numbers read back exactly: cJSON's own
 * printing keeps 15 digits whenever they are merely close, which would lose the last bits. */
char *em_results_print(const cJSON *doc, bool formatted);

/* Checks that doc looks like a results document (schema id, metrics object); `what` names it in
 * the error (a file name or "history line 3"), exit status 2. */
em_status em_results_check(const cJSON *doc, const char *what);
/* Reads and checks a results file. */
em_status em_results_load(const char *path, cJSON **out);

/* One metric of a document by its key "<stage>.<metric>". Returns false when absent; a null value
 * reads as NaN. */
bool em_results_metric(const cJSON *doc, const char *key, double *value, double *error,
                       bool *has_error);
/* Calls fn for every metric of a document, in document order. */
void em_results_each_metric(const cJSON *doc,
                            void (*fn)(const char *key, double value, const double *error,
                                       bool timing, void *user),
                            void *user);

/* Formats t as "2026-12-02T13:50:50Z" into buf (at least 21 bytes). */
const char *em_results_time(time_t t, char *buf, size_t size);

#endif
