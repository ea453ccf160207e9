/* Process bootstrap: who am I, how many are we, where are the others. Under a PMIx launcher
 * (Slurm `srun --mpi=pmix`, OpenMPI `mpirun`, `prterun`) PMIx_Init gives the rank, world size and
 * locality and the world communicator uses the mpi backend; without a launcher the process is the
 * only rank and the world communicator is `local` (no PMIx server needed). */
#ifndef EVALMESH_BOOTSTRAP_H
#define EVALMESH_BOOTSTRAP_H

#include <stdbool.h>

#include "runner/comm/comm.h"

typedef struct em_bootstrap {
    bool launched;  /* started by a PMIx launcher */
    int rank;       /* world rank */
    int size;       /* world size */
    int local_rank; /* rank among the ranks on this node */
    int local_size; /* ranks on this node */
    int node_id;    /* 0-based index of this node */
    int node_count; /* nodes in the run */
    em_comm *world; /* CPU communicator over all ranks */
} em_bootstrap;

/* Initialises PMIx (when launched) and the world communicator; fails with EM_EXIT_DISTRIBUTED and
 * a message naming what did not answer when that takes longer than timeout_s. */
em_status em_bootstrap_init(double timeout_s, em_bootstrap *out);
/* Ends the whole job at once with `status`, for a rank that found the job broken (a peer dead or
 * silent): MPI_Abort once MPI is up, else PMIx_Abort when launched, so the launcher (mpirun, srun)
 * stops every rank instead of leaving them waiting. Returns only when neither is up. */
void em_bootstrap_abort_job(int status, const char *reason);
/* Destroys the world communicator and finalises MPI and PMIx. */
void em_bootstrap_finalize(em_bootstrap *boot);

#endif
