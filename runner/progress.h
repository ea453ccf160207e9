/* Rank 0's progress display during a run: every rank already keeps its progress in
 * <run_dir>/state/rank-<R>.json (runner/rank_state.h, rate-limited atomic writes), so rank 0 reads
 * those files from a background thread — the forward never waits for it and no collective is
 * involved (ranks on other nodes are seen when the run directory is on a shared file system, as
 * for `evalmesh check-state`; ranks whose files rank 0 cannot read are left out). On a terminal it
 * redraws one line on stderr: [fwd] 7/20 windows (35.0%), 350 tokens/s, ETA 0:08, slowest rank 1
 * (20%) otherwise it logs that line every 10 seconds. Nothing is shown when the log level is below
 * info (`evalmesh run --quiet`). */
#ifndef EVALMESH_PROGRESS_H
#define EVALMESH_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Progress summed over the ranks that are in a stage with a known total (e.g. forward). */
typedef struct em_progress_totals {
    int ranks;                /* ranks reporting progress */
    int64_t done;             /* windows done, summed */
    int64_t total;            /* windows to do, summed */
    double tokens_per_second; /* sum over ranks of tokens / seconds in the stage */
    double eta_seconds; /* the latest rank's estimate (each rank at its own pace); <0: unknown */
    int slowest_rank;   /* the rank with the latest estimate; -1 when none */
    double slowest_fraction; /* its done / total */
    char stage[64];          /* the stage of the lowest reporting rank */
} em_progress_totals;

/* Reads the state files of ranks 0..world_size-1 (missing or half-written ones are skipped). */
void em_progress_read(const char *run_dir, int world_size, em_progress_totals *out);
/* The one-line summary (no newline) into buf. */
void em_progress_format(const em_progress_totals *t, char *buf, size_t size);

typedef struct em_progress em_progress;
/* Starts the display thread (call on rank 0 once the run directory exists); NULL when the log
 * level is below info. */
em_progress *em_progress_start(const char *run_dir, int world_size);
/* Stops and joins the thread and erases the terminal line. NULL is accepted. */
void em_progress_stop(em_progress *p);

#endif
