/* The collective seam. A communicator is a group of ranks with one backend behind it:
 *   local  one rank, no other process (copies);
 *   mpi    OpenMPI, CPU buffers;
 *   nccl   NCCL, GPU buffers (compiled when CUDA and NCCL are found).
 * Stages see only these functions. Every call returns an error value instead of hanging: each
 * collective has a timeout (em_comm_set_timeout), and a rank that died or never arrived becomes
 * an error, exit status EM_EXIT_DISTRIBUTED, naming the rank when it can be known.
 * All ranks of a communicator must call the same collectives in the same order. */
#ifndef EVALMESH_COMM_H
#define EVALMESH_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef enum em_dtype {
    EM_DTYPE_INT64,
    EM_DTYPE_UINT64,
    EM_DTYPE_FLOAT64,
    EM_DTYPE_FLOAT32,
} em_dtype;

typedef enum em_reduce_op {
    EM_OP_SUM,
    EM_OP_MAX,
    EM_OP_MIN,
} em_reduce_op;

size_t em_dtype_size(em_dtype dtype);
const char *em_dtype_name(em_dtype dtype);

typedef struct em_comm em_comm;

/* The table each backend fills. `comm` is the backend's own communicator. */
typedef struct em_comm_backend {
    const char *name;
    em_status (*allreduce)(em_comm *comm, const void *send, void *recv, size_t count,
                           em_dtype dtype, em_reduce_op op);
    /* recv holds size * bytes, rank r's block at r * bytes. */
    em_status (*allgather)(em_comm *comm, const void *send, void *recv, size_t bytes);
    em_status (*broadcast)(em_comm *comm, void *buf, size_t bytes, int root);
    em_status (*barrier)(em_comm *comm);
    /* Sends `bytes` to rank dest and receives `bytes` from rank source at once (a ring step:
     * every rank calls it, each with its own dest and source). */
    em_status (*sendrecv)(em_comm *comm, const void *send, int dest, void *recv, int source,
                          size_t bytes);
    /* Ranks with equal color form a new communicator, ordered by key (then old rank). */
    em_status (*split)(em_comm *comm, int color, int key, em_comm **out);
    /* Tells the other ranks to stop waiting (best effort) and makes later calls fail. */
    void (*abort)(em_comm *comm, const char *reason);
    void (*destroy)(em_comm *comm);
} em_comm_backend;

struct em_comm {
    const em_comm_backend *backend;
    int rank; /* in this communicator */
    int size;
    int *world_ranks; /* world rank of each member (size entries), for error messages */
    double timeout_s; /* limit for each collective */
    void *impl;       /* the backend's handle */
};

/* Calls through the table (NULL comm is an error, not a crash). */
em_status em_allreduce(em_comm *comm, const void *send, void *recv, size_t count, em_dtype dtype,
                       em_reduce_op op);
em_status em_allgather(em_comm *comm, const void *send, void *recv, size_t bytes);
em_status em_broadcast(em_comm *comm, void *buf, size_t bytes, int root);
em_status em_barrier(em_comm *comm);
em_status em_sendrecv(em_comm *comm, const void *send, int dest, void *recv, int source,
                      size_t bytes);
em_status em_comm_split(em_comm *comm, int color, int key, em_comm **out);
void em_comm_abort(em_comm *comm, const char *reason);
void em_comm_destroy(em_comm *comm);
void em_comm_set_timeout(em_comm *comm, double seconds);

#endif
