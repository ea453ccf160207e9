/* The collective calls stages make (see comm.h): each checks its arguments, then calls through
 * the communicator's backend table. Also the dtype helpers shared by every backend. */
#include "runner/comm/comm.h"

#include <stdlib.h>

size_t em_dtype_size(em_dtype dtype) {
    switch (dtype) {
    case EM_DTYPE_INT64:
        return sizeof(int64_t);
    case EM_DTYPE_UINT64:
        return sizeof(uint64_t);
    case EM_DTYPE_FLOAT64:
        return sizeof(double);
    case EM_DTYPE_FLOAT32:
        return sizeof(float);
    }
    return 0;
}

const char *em_dtype_name(em_dtype dtype) {
    switch (dtype) {
    case EM_DTYPE_INT64:
        return "int64";
    case EM_DTYPE_UINT64:
        return "uint64";
    case EM_DTYPE_FLOAT64:
        return "float64";
    case EM_DTYPE_FLOAT32:
        return "float32";
    }
    return "unknown";
}

static em_status no_comm(const char *what) {
    return em_error_new(EM_EXIT_FAILURE, "%s called without a communicator", what);
}

em_status em_allreduce(em_comm *comm, const void *send, void *recv, size_t count, em_dtype dtype,
                       em_reduce_op op) {
    if (!comm) return no_comm("allreduce");
    if (em_dtype_size(dtype) == 0)
        return em_error_new(EM_EXIT_FAILURE, "allreduce: unknown dtype %d", (int)dtype);
    if (op != EM_OP_SUM && op != EM_OP_MAX && op != EM_OP_MIN)
        return em_error_new(EM_EXIT_FAILURE, "allreduce: unknown reduction %d", (int)op);
    if (count == 0) return NULL;
    return comm->backend->allreduce(comm, send, recv, count, dtype, op);
}

em_status em_allgather(em_comm *comm, const void *send, void *recv, size_t bytes) {
    if (!comm) return no_comm("allgather");
    if (bytes == 0) return NULL;
    return comm->backend->allgather(comm, send, recv, bytes);
}

em_status em_broadcast(em_comm *comm, void *buf, size_t bytes, int root) {
    if (!comm) return no_comm("broadcast");
    if (root < 0 || root >= comm->size)
        return em_error_new(EM_EXIT_FAILURE, "broadcast: root %d is not a rank of a %d-rank group",
                            root, comm->size);
    if (bytes == 0) return NULL;
    return comm->backend->broadcast(comm, buf, bytes, root);
}

em_status em_barrier(em_comm *comm) {
    if (!comm) return no_comm("barrier");
    return comm->backend->barrier(comm);
}

em_status em_sendrecv(em_comm *comm, const void *send, int dest, void *recv, int source,
                      size_t bytes) {
    if (!comm) return no_comm("sendrecv");
    if (dest < 0 || dest >= comm->size || source < 0 || source >= comm->size)
        return em_error_new(EM_EXIT_FAILURE,
                            "sendrecv: ranks %d and %d are not both ranks of a %d-rank group", dest,
                            source, comm->size);
    if (bytes == 0) return NULL;
    return comm->backend->sendrecv(comm, send, dest, recv, source, bytes);
}

em_status em_comm_split(em_comm *comm, int color, int key, em_comm **out) {
    *out = NULL;
    if (!comm) return no_comm("split");
    if (color < 0) return em_error_new(EM_EXIT_FAILURE, "split: color %d is negative", color);
    em_status err = comm->backend->split(comm, color, key, out);
    if (!err && *out) (*out)->timeout_s = comm->timeout_s;
    return err;
}

void em_comm_abort(em_comm *comm, const char *reason) {
    if (comm) comm->backend->abort(comm, reason);
}

void em_comm_destroy(em_comm *comm) {
    if (comm) comm->backend->destroy(comm);
}

void em_comm_set_timeout(em_comm *comm, double seconds) {
    if (comm) comm->timeout_s = seconds;
}
