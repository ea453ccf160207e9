/* The `counting` collective backend: wraps another communicator and counts the collectives
 * called on it, then forwards each call unchanged. The mesh stage wraps its groups in it when a
 * recipe asks (`count_calls: true`), which is how tests see which group every stage talks to. */
#ifndef EVALMESH_BACKEND_COUNTING_H
#define EVALMESH_BACKEND_COUNTING_H

#include <stdint.h>

#include "runner/comm/comm.h"

extern const em_comm_backend em_backend_counting;

/* A communicator with inner's ranks that adds 1 to *calls per collective (allreduce, allgather,
 * broadcast, barrier, split) and then calls inner. Takes inner (destroying the wrapper destroys
 * it); *calls must outlive the wrapper. */
em_comm *em_comm_counting_wrap(em_comm *inner, int64_t *calls);

#endif
