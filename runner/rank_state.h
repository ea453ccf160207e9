/* Per-rank state files: every rank records, in <run_dir>/state/rank-<R>.json, the stage it is in,
 * its progress, a heartbeat time, its pid and its host name, so `evalmesh check-state RUN_DIR`
 * (and rank 0's progress line) can tell which ranks are behind, silent or dead. Writes are atomic
 * (util/atomic_file.h) and rate-limited, so calling em_rank_state_progress from a hot loop is
 * cheap. Inside a long step the current rank's state is also rewritten by heartbeats
 * (util/heartbeat.h, called from the forward's layer loop) once nothing was written for
 * EVALMESH_HEARTBEAT_S seconds (default 10); "beats" counts those writes. */
#ifndef EVALMESH_RANK_STATE_H
#define EVALMESH_RANK_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

typedef struct em_rank_state em_rank_state;

/* Creates <run_dir>/state/ if needed and this rank's file. Exit 2 when EVALMESH_HEARTBEAT_S is
 * not a number of seconds from 0 to 86400. */
em_status em_rank_state_open(const char *run_dir, int rank, int world_size, em_rank_state **out);
/* Enters a stage: status is "running", "done", "failed" or "interrupted". Always written. */
void em_rank_state_stage(em_rank_state *st, const char *stage, const char *status);
/* Marks the current stage "failed" with reason (e.g. which peer died), written at once. */
void em_rank_state_fail(em_rank_state *st, const char *reason);
/* Progress inside the current stage (e.g. windows done of total). Written at most every 0.5 s. */
void em_rank_state_progress(em_rank_state *st, int64_t done, int64_t total, int64_t tokens);
void em_rank_state_close(em_rank_state *st);

/* Whether process `pid`, which ran on `host`, is gone, as far as this host can tell (false for a
 * process on another host). */
bool em_rank_state_gone(long pid, const char *host);
/* A peer that died without a word: the first rank other than `self` whose state file in run_dir
 * still says "running" under a pid on this host that no longer exists. Returns a new description
 * naming its rank, pid, host and stage, or NULL when there is none (ranks on other hosts cannot
 * be checked from here). */
char *em_rank_state_find_dead(const char *run_dir, int world_size, int self);

/* The state of the calling process (set by the runner), so stages can report progress without
 * carrying the pointer; NULL when no run directory exists (validate, unit tests). Setting it also
 * points the heartbeat hook at it. */
em_rank_state *em_rank_state_current(void);
void em_rank_state_set_current(em_rank_state *st);

#endif
