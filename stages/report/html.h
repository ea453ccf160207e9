/* The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched) with
 * the gate's verdict at the top when the results document has a `gate` section (passed or
 * failed; each check's value, baseline, difference ± its error, threshold and bound; the
 * baseline run), the run's provenance and metrics, per-rank throughput as a bar chart, the
 * distribution of the per-window mean NLL as a histogram, a metric's history as a line chart
 * (error bars, each run's date and short commit on the x axis, failed runs marked, the gate's
 * baseline and threshold lines), and, when the gate paired this run with its baseline, a scatter
 * of each window's mean NLL, candidate against baseline. */
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
    /* When the gate paired this run with its baseline: each window's mean NLL of the baseline
     * and of this run, in window order (paired_window_count entries each); 0: no scatter. */
    const double *baseline_window_nll;
    const double *candidate_window_nll;
    size_t paired_window_count;
} em_html_input;

/* The page (heap string). The verdict is <section id="verdict" class="verdict pass|fail">;
 * charts are <svg class="chart" id="throughput|nll|history|paired">. */
char *em_html_report(const em_html_input *in);

#endif
