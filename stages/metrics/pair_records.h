/* Per-token records of a compare stage (option `records: true`): every scored token of this
 * rank's windows, one file per candidate and rank, so users can diff runs and check or extend the
 * statistics from the tokens (tests/stages/test_perplexity_kld.py recomputes every statistic from
 * them with NumPy).
 *
 * File: <run_dir>/records/<stage>.<candidate stage>.rank<R>.tokens, written by each rank for its
 * own windows (compare runs with tp = cp = 1, so every rank is a dp rank), in window order.
 * Concatenating the ranks' files in rank order (or sorting by window, then position) gives the
 * order the statistics are summed in.
 *
 * Layout, little-endian (the host's: x86-64 and aarch64):
 *   header, 208 bytes:
 *     char[8]  magic "EMPREC01"
 *     char[64] reference model's digest (loaded_model.h: 32 hex digits, NUL-padded),
 *              char[64] candidate's, char[64] dataset file sha256 (hex)
 *     uint32   bytes per record (48), uint32 0
 *   then one 48-byte record per scored token (as many as the file holds):
 *     int64  window (global index)
 *     int32  position in the window (input position whose next token is the target)
 *     int32  target token id
 *     int32  argmax of the reference, int32 argmax of the candidate
 *     double nll of the reference (-ln p_ref(target)), double nll of the candidate
 *     double KL(P_ref || P_cand) over the vocabulary
 * dp = exp(-nll_cand) - exp(-nll_ref); the top token agrees when both argmaxes are equal. */
#ifndef EVALMESH_METRICS_PAIR_RECORDS_H
#define EVALMESH_METRICS_PAIR_RECORDS_H

#include <stdint.h>

#include "util/error.h"

enum { EM_PAIR_RECORD_BYTES = 48, EM_PAIR_HEADER_BYTES = 208 };

/* What identifies the pair: the two models' digests and the dataset's sha256 (hex). */
typedef struct em_pair_key {
    const char *reference_digest, *candidate_digest, *dataset_sha256;
} em_pair_key;

typedef struct em_pair_writer em_pair_writer;

/* Creates <run_dir>/records/ if needed and writes the header of this rank's file (replacing one
 * an earlier attempt left). Errors exit 4, naming the file. */
em_status em_pair_writer_open(const char *run_dir, const char *stage, const char *candidate,
                              int rank, const em_pair_key *key, em_pair_writer **out);
/* Appends the n scored tokens of window `window` starting at input position `first`. */
em_status em_pair_append(em_pair_writer *w, int64_t window, int32_t first, int32_t n,
                         const int32_t *target, const int32_t *argmax_ref,
                         const int32_t *argmax_cand, const double *nll_ref, const double *nll_cand,
                         const double *kld);
/* Flushes and closes (NULL is fine); an error when the data could not be written. */
em_status em_pair_writer_close(em_pair_writer *w);

#endif
