/* The watchdog: how a rank that timed out in a collective learns which ranks did not arrive, and
 * how an abort reaches the other ranks. Each process runs one helper thread over a private
 * duplicate of MPI_COMM_WORLD. Every mpi (and nccl) communicator has a 64-bit id, equal on all its
 * members, and a count of collectives entered; the collective code records "entered collective
 * `seq` of group `id`" here before it starts. After a timeout the waiting rank asks every member
 * of the group, through the helper threads, how far it got on that group:
 *   - an answer with a count >= seq: the rank arrived (it waits too);
 *   - an answer with a smaller count: the rank is alive but busy elsewhere ("did not arrive");
 *   - no answer within a short wait: the rank exited or its process is stuck ("did not answer").
 * An abort sends its reason to every rank; their pending and later collectives fail at once with
 * "rank R aborted: reason" instead of waiting for their own timeout.
 * All MPI calls of evalmesh go through em_mpi_lock/unlock, so MPI_THREAD_SERIALIZED suffices. */
#ifndef EVALMESH_WATCHDOG_H
#define EVALMESH_WATCHDOG_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

void em_mpi_lock(void);
void em_mpi_unlock(void);

/* Starts the helper thread (after MPI_Init). */
em_status em_watchdog_start(void);
/* Stops it (before MPI_Finalize). */
void em_watchdog_stop(void);

/* A group takes part in the progress table while it exists. */
void em_watchdog_register(uint64_t group_id);
void em_watchdog_unregister(uint64_t group_id);
/* This rank entered collective number `seq` (1, 2, ...) of the group. */
void em_watchdog_entered(uint64_t group_id, int64_t seq);

/* After a timeout in collective `seq` of the group: asks its members (world ranks, `size` of them)
 * how far they are and returns a new string naming the ones that did not arrive, e.g.
 * "rank 2 did not arrive (it is busy after collective 4 of this group)". */
char *em_watchdog_diagnose(uint64_t group_id, int64_t seq, const int *world_ranks, int size);

/* Sends reason to every other rank (best effort, at most half a second). */
void em_watchdog_broadcast_abort(const char *reason);
/* When another rank aborted: its world rank and a new copy of its reason; else false. */
bool em_watchdog_remote_abort(int *from_rank, char **reason);
/* Whether this process aborted or saw another rank abort (then MPI_Finalize must be skipped). */
bool em_watchdog_failed(void);

#endif
