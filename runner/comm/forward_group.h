/* A communicator seen as a forward's group (stages/kernels/forward_backend.h): the forward
 * backends know no communicator type, only these callbacks, which call the collective table. */
#ifndef EVALMESH_FORWARD_GROUP_H
#define EVALMESH_FORWARD_GROUP_H

#include "runner/comm/comm.h"
#include "stages/kernels/forward_backend.h"

/* comm's rank and size, and an allgather through em_allgather (comm must outlive the group). */
em_forward_group em_forward_group_of(em_comm *comm);

#endif
