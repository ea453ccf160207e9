/* Example files: a task stage's per-example values (stages/metrics/example_values.h) kept for
 * paired gates, as token files (token_file.h) keep a forward stage's per-token scores. The task
 * stage writes one into the run directory (examples_<stage>.json, beside lm_eval_results.json);
 * the report stage names it with its sha256 in results.json's "examples" and copies it beside a
 * history file (<history>.examples/<sha256>.json), so a later run's gate finds it through
 * `baseline: {pin: DIR}`, a results file or `baseline_history`.
 *
 * Layout: one line of JSON,
 *   {"format": "evalmesh.task_examples/1", "stage": STAGE,
 *    "tasks": [{"key": "<stage>/<task>", "doc": [doc index, ...], "sha256": [hex, ...],
 *               "binary": [metrics whose values are 0 or 1 by definition, e.g. "acc"],
 *               "values": {"acc": [0 or 1, ...], "acc_norm": [...], ...}}, ...]}
 * one entry per task, then per group of tasks (its members' examples one after another), every
 * array in document order, one entry per example; numbers as cJSON prints them (the
 * shortest text that reads back to the same double), so the same values give the same bytes. */
#ifndef EVALMESH_REPORT_EXAMPLE_FILE_H
#define EVALMESH_REPORT_EXAMPLE_FILE_H

#include "util/error.h"
#include "stages/metrics/example_values.h"

/* The file's text (heap, ending in a newline). */
char *em_example_file_text(const em_example_values *v);
/* Writes v to path atomically. Errors: a failed write, exit 4. */
em_status em_example_file_write(const char *path, const em_example_values *v);
/* Reads path, checking its sha256 when sha256_hex is not NULL. Errors exit 2, naming the file. */
em_status em_example_file_read(const char *path, const char *sha256_hex, em_example_values **out);

#endif
