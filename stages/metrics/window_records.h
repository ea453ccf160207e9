/* Window records: every finished window's exact scores, appended by the rank that computed it to
 * its own file in the run directory as soon as the window is done, so a run that is killed,
 * preempted or interrupted keeps them and `evalmesh run --resume` computes only the rest.
 *
 * Files: <run_dir>/records/<stage>.rank<R>.<N>.bin, N the first number free when the rank opened
 * it (each attempt of a run writes new files; earlier ones are only read). Written only by the
 * first rank of each tp x cp group (its peers hold the same numbers).
 *
 * Binary layout, all integers and doubles little-endian (the host's; x86-64 and aarch64):
 *   file header, 224 bytes:
 *     char[8]  magic "EMWREC02"
 *     char[64] the model's digest (loaded_model.h: 32 hex digits, NUL-padded; files written
 *              before the digest held the header sha256), char[64] dataset file sha256 (hex),
 *     char[64] sha256 (hex) of recipe.resolved.yaml as the run resolved it
 *     char[16] the precision the products were rounded with ("exact", "ggml", "bf16"; NUL-padded)
 *     uint32   crc32 of the 216 bytes before it, uint32 0
 *   (files of the format before, "EMWREC01", had no precision and a 208-byte header: a resume
 *   computes their windows again, saying so)
 *   then records, each:
 *     uint32   magic 0x52574d45 ("EMWR")
 *     uint32   payload bytes P = 40 + 16 n
 *     uint32   crc32 (IEEE, as zlib) of the payload
 *     payload: int64 window index, int32 n (scored tokens), int32 0, int64 words, int64 bytes,
 *              double sum of the n NLLs in position order (the window's contribution to the
 *              NLL accumulator; count n), int32 target[n], int32 argmax[n], double nll[n]
 * A record is used only when its magic, length and checksum hold and it agrees with the dataset's
 * window (n, words, bytes, targets); a torn tail or a damaged record is skipped (the reader looks
 * for the next magic) and its window computed again. Records are written with one write() each
 * (a killed process loses nothing written) and fsync'd at most every flush_s seconds and at the
 * end. The task stage writes its requests in this form, a request as a window: a scored one with
 * its continuation's targets, argmaxes and nll, a generation (generate_until) with its generated
 * ids as both targets and argmaxes, nll 0, words why it stopped and bytes the prompt ids kept
 * (stages/kinds/task.c). */
#ifndef EVALMESH_WINDOW_RECORDS_H
#define EVALMESH_WINDOW_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* What a records file was written for; a resume refuses files written for something else. */
typedef struct em_records_key {
    char model_digest[65];   /* the model's content digest (loaded_model.h) */
    char dataset_sha256[65]; /* the dataset file's sha256 */
    char recipe_sha256[65];  /* the resolved recipe's sha256 */
    char precision[17];      /* how the products were rounded (forward_backend.h's names) */
} em_records_key;

/* The key of a model digest, a dataset file, a resolved recipe sha256 and a precision name (NULL:
 * empty; a precision NULL: "exact", what a run without the option computed). */
em_records_key em_records_key_of(const char *model_digest, const char *dataset_sha256,
                                 const char *recipe_sha256, const char *precision);

/* One finished window's scores (arrays of token_count; owned by whoever filled them). */
typedef struct em_window_record {
    int64_t window;
    int32_t token_count;
    int64_t words, bytes;
    const int32_t *target, *argmax;
    const double *nll;
} em_window_record;

typedef struct em_records_writer em_records_writer;

/* Creates <run_dir>/records/ if needed and this rank's new file with key's header. Errors exit 4.
 */
em_status em_records_writer_open(const char *run_dir, const char *stage, int rank,
                                 const em_records_key *key, double flush_s,
                                 em_records_writer **out);
/* Appends one record with a single write; fsyncs when flush_s passed since the last fsync. */
em_status em_records_append(em_records_writer *w, const em_window_record *r);
/* fsyncs and closes (NULL is fine). */
em_status em_records_writer_close(em_records_writer *w);

/* The records found for one stage: for each global window index below window_limit the record
 * (NULL: none usable). */
typedef struct em_records_found {
    size_t window_limit;
    em_window_record **by_window;   /* (window_limit) */
    size_t files, records, damaged; /* read, used, skipped as torn or damaged */
} em_records_found;

/* Reads every <run_dir>/records/<stage>.rank*.bin. A file whose header names another precision,
 * model, dataset or recipe is a refusal (exit 2) naming what changed, the file, and the digest or
 * sha256 it was written for and the one now; damaged records are counted and warned about. No
 * records directory: nothing found. */
em_status em_records_read(const char *run_dir, const char *stage, const em_records_key *key,
                          size_t window_limit, em_records_found *out);
void em_records_found_free(em_records_found *f);

/* Where each window's record is, without its scores: what a reader that takes the windows one at
 * a time keeps (the token file), so its memory follows the windows, not the tokens. */
typedef struct em_record_place {
    int32_t file;        /* index into files; -1: no usable record */
    int32_t token_count; /* its n */
    uint64_t offset;     /* of its payload in the file */
} em_record_place;

typedef struct em_records_index {
    size_t window_limit;
    em_record_place *by_window; /* (window_limit) */
    char **files;               /* the paths read, in the order read */
    int *fds;                   /* (file_count) each opened for reading, -1 when it failed */
    size_t file_count, records, damaged;
} em_records_index;

/* Finds the records as em_records_read does (the same files, checks and refusals, the same record
 * for each window) but keeps only their places. */
em_status em_records_index_read(const char *run_dir, const char *stage, const em_records_key *key,
                                size_t window_limit, em_records_index *out);
/* Reads the record of `window` (which has one) into *r; its arrays point into *buf, grown as
 * needed (free it after the last). Errors (the file unreadable since): exit 4, naming it. */
em_status em_records_index_load(const em_records_index *ix, size_t window, em_window_record *r,
                                void **buf, size_t *cap);
void em_records_index_free(em_records_index *ix);

#endif
