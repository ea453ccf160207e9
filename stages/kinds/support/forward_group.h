/* A communicator seen as a forward's group (stages/kernels/forward_backend.h), for the stage kinds
 * that run a forward over a mesh's tp and cp groups: the forward backends know no communicator
 * type, only these callbacks, which call the collective table and add the time they take to the
 * link's `seconds` (what the forward reports as time in tp and cp communication). */
#ifndef EVALMESH_FORWARD_GROUP_H
#define EVALMESH_FORWARD_GROUP_H

#include "runner/comm/comm.h"
#include "stages/kernels/forward_backend.h"

typedef struct em_forward_link {
    em_comm *comm;
    double seconds; /* spent in its collectives so far */
} em_forward_link;

/* The link's communicator as a group (the link must outlive the group). */
em_forward_group em_forward_group_of(em_forward_link *link);

#endif
