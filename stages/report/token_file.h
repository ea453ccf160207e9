/* Token files: a run's per-token scores kept for paired comparisons (stages/kinds/gate.c). The
 * report stage writes one for the metrics' first input into the run directory
 * (tokens/<stage>.tokens, named with its sha256 in results.json's "tokens") and copies it beside a
 * history file
 * (<history>.tokens/<sha256>.tokens, named in the history line), so a later run can compare
 * token by token with this one when it becomes the baseline.
 *
 * Layout (integers and doubles little-endian, the host's):
 *   "EMTOKS01\n", then one line of JSON: {"stage", "model_sha256" (the model's digest,
 *   loaded_model.h; files written before the digest hold its header sha256), "dataset_sha256",
 *   "windows": {<dataset options that decide the windows>}, "window_count", "token_count"},
 *   then int32 tokens_per_window[window_count], int32 target[token_count],
 *   uint8 correct[token_count] (argmax == target), double nll[token_count], tokens in window order
 *   then position order. The reader checks the file's sha256 against the one that names it. */
#ifndef EVALMESH_REPORT_TOKEN_FILE_H
#define EVALMESH_REPORT_TOKEN_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/metrics/window_records.h"

typedef struct em_token_set {
    char *stage;       /* the forward stage that scored them */
    char *window_spec; /* JSON object of strings: the dataset options that decide the windows */
    char model_digest[65], dataset_sha256[65]; /* the header's "model_sha256", "dataset_sha256" */
    size_t window_count;
    int32_t *window_tokens; /* (window_count) scored tokens of each window */
    size_t token_count;
    int32_t *target;  /* (token_count) */
    uint8_t *correct; /* (token_count) 1 when the argmax was the target */
    double *nll;      /* (token_count) */
} em_token_set;

/* The set of <run_dir>/records/<stage>.rank*.bin (window records, see window_records.h) for the
 * windows 0 .. window_count-1. *complete is false (and *out empty) when a window has no record
 * (a run without a run directory, records that could not be written); the reason goes to *why
 * (heap). Errors: unreadable records, exit 2. */
em_status em_token_set_from_records(const char *run_dir, const char *stage,
                                    const em_records_key *key, const char *window_spec,
                                    size_t window_count, em_token_set *out, bool *complete,
                                    char **why);

/* Writes the token file of the same records to path (atomically), reading them one window at a
 * time, so its memory follows the windows, not the tokens; sha256_hex gets the file's sha256.
 * *complete and *why as em_token_set_from_records's (nothing is written when incomplete).
 * Errors: unreadable records, exit 2; a failed write, exit 4. */
em_status em_token_file_write_from_records(const char *path, const char *run_dir, const char *stage,
                                           const em_records_key *key, const char *window_spec,
                                           size_t window_count, char sha256_hex[65], bool *complete,
                                           char **why);
/* Reads path, checking its sha256 when sha256_hex is not NULL. Errors exit 2, naming the file. */
em_status em_token_file_read(const char *path, const char *sha256_hex, em_token_set *out);

/* Whether base and cand scored the same windows: the same dataset file, the same window options
 * and, window by window, the same number of tokens with the same targets. NULL when they did,
 * else the first difference in words (heap), e.g. "protocol is chunked in the baseline, sliding
 * in this run". */
char *em_token_set_difference(const em_token_set *base, const em_token_set *cand);

void em_token_set_free(em_token_set *set);

#endif
