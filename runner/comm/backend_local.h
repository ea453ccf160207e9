/* The `local` collective backend: a communicator of one rank, used when evalmesh runs without a
 * launcher (and by the mesh stage for groups of one). Every collective is a copy. */
#ifndef EVALMESH_BACKEND_LOCAL_H
#define EVALMESH_BACKEND_LOCAL_H

#include "runner/comm/comm.h"

extern const em_comm_backend em_backend_local;

/* A one-rank communicator; world_rank names the process in error messages. */
em_comm *em_comm_local_new(int world_rank, double timeout_s);

#endif
