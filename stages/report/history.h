/* History files: one results document per line (JSON Lines), appended by each run's report stage,
 * so nightly runs can be compared (`evalmesh history`, the gate's `baseline_history`, the HTML
 * report's line chart). A line is the run's results document without its per-rank timing, with
 * the run's gate section when it had one (failed runs are recorded too, but never chosen as a
 * baseline) and, for runs that can be a baseline, "tokens" naming their token file
 * (token_file.h) relative to the history file's folder. */
#ifndef EVALMESH_REPORT_HISTORY_H
#define EVALMESH_REPORT_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

#include "util/error.h"

typedef struct em_history {
    cJSON **entries;   /* results documents, in file order */
    int *line_numbers; /* the line each entry came from (1-based) */
    size_t count;
    int skipped; /* corrupt lines that were reported and left out */
} em_history;

/* Appends results (without "ranks") as one line with a single write (em_atomic_append_line: a
 * short write is cut back, and a line never continues a torn one); creates the file and its folder
 * if needed. */
em_status em_history_append(const char *path, const cJSON *results);

/* Reads a history. A line that is not a results document is reported as a warning naming
 * "FILE:LINE" and skipped; the other lines are still used. A complete run glued to a torn line
 * (an older writer's append that did not finish) is recovered, the torn bytes reported. A missing
 * file is an error (exit 2) unless missing_ok, when it reads as an empty history. */
em_status em_history_load(const char *path, bool missing_ok, em_history *out);
void em_history_free(em_history *h);

/* The verdict a line records: "passed" or "failed" (its "gate" section), or "no gate". */
const char *em_history_verdict(const cJSON *entry);
/* The entry a gate compares the next run against: the last one whose gate passed or that had no
 * gate, never a failed one (so a regression cannot become the new normal). -1 when none. */
long em_history_baseline(const em_history *h);

#endif
