/* The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched) with
 * the run's provenance and metrics, per-rank throughput as a bar chart, the distribution of the
 * per-window mean NLL as a histogram, and a metric's history as a line chart. */
#ifndef EVALMESH_REPORT_HTML_H
#define EVALMESH_REPORT_HTML_H

#include <stddef.h>

#include <cJSON.h>

#include "stages/report/history.h"

typedef struct em_html_input {
    const cJSON *results;     /* this run's results document */
    const double *window_nll; /* mean NLL of each window (window_count entries) */
    size_t window_count;
    const em_history *history;  /* NULL: no history chart */
    const char *history_metric; /* key charted from the history; NULL: the first non-timing one */
} em_html_input;

/* The page (heap string). Charts are <svg class="chart" id="throughput|nll|history">. */
char *em_html_report(const em_html_input *in);

#endif
