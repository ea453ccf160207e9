/* The `mpi` collective backend: OpenMPI over CPU buffers. Every collective is nonblocking
 * (MPI_Iallreduce, MPI_Iallgather, MPI_Ibcast, MPI_Ibarrier) and polled with MPI_Test against the
 * communicator's timeout; on timeout the watchdog (watchdog.h) names the ranks that did not
 * arrive, the abort reaches the other ranks, and the call returns EM_EXIT_DISTRIBUTED. Errors of
 * MPI itself are returned (MPI_ERRORS_RETURN), never fatal. */
#ifndef EVALMESH_BACKEND_MPI_H
#define EVALMESH_BACKEND_MPI_H

#include <mpi.h>

#include "runner/comm/comm.h"

extern const em_comm_backend em_backend_mpi;

/* The world communicator (a duplicate of MPI_COMM_WORLD); MPI and the watchdog must be running. */
em_status em_comm_mpi_world(double timeout_s, em_comm **out);
/* The MPI communicator behind an mpi-backend em_comm (for code that needs raw MPI). */
MPI_Comm em_comm_mpi_handle(const em_comm *comm);

#endif
