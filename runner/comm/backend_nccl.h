/* The `nccl` collective backend: NCCL over GPU buffers (host buffers are staged through a device
 * buffer, so stages that pass host memory work over it too).
 * Compiled when the build found CUDA and NCCL (EVALMESH_HAVE_CUDA); otherwise
 * em_comm_nccl_world fails with exit status 2 saying the build lacks it. */
#ifndef EVALMESH_BACKEND_NCCL_H
#define EVALMESH_BACKEND_NCCL_H

#include <stdbool.h>

#include "runner/comm/comm.h"

/* The NCCL world over the ranks of cpu_world (the bootstrap's world; NULL or local means one
 * rank). Each rank uses GPU local_rank % (visible GPUs). Rank 0 makes the NCCL unique id and the
 * control plane (control.h) hands it to the others. Collective over cpu_world. Errors: no GPU
 * visible on some rank (exit 4, naming the rank and CUDA's reason), a build without CUDA
 * (exit 2), init not finishing within timeout_s (exit 5). */
em_status em_comm_nccl_world(em_comm *cpu_world, int local_rank, double timeout_s, em_comm **out);

/* *everywhere = every rank of world sees at least one CUDA device (false in a build without
 * CUDA). Collective over world: the mesh's `backend: auto` picks nccl by it. */
em_status em_comm_nccl_everywhere(em_comm *world, bool *everywhere);

#endif
