/* The `local` backend (see backend_local.h): one rank, so reductions, gathers and broadcasts are
 * copies, a barrier returns at once and a split gives another one-rank communicator. */
#include "runner/comm/backend_local.h"

#include <stdlib.h>
#include <string.h>

#include "runner/comm/comm.h"

typedef struct local_impl {
    char *aborted; /* the reason given to abort, or NULL */
} local_impl;

static em_status check_alive(em_comm *comm, const char *what) {
    local_impl *impl = comm->impl;
    if (!impl->aborted) return NULL;
    return em_error_new(EM_EXIT_DISTRIBUTED, "%s on an aborted communicator (%s)", what,
                        impl->aborted);
}

static em_status local_allreduce(em_comm *comm, const void *send, void *recv, size_t count,
                                 em_dtype dtype, em_reduce_op op) {
    em_status err = check_alive(comm, "allreduce");
    if (err) return err;
    if (send != recv) memmove(recv, send, count * em_dtype_size(dtype));
    return NULL;
}

static em_status local_allgather(em_comm *comm, const void *send, void *recv, size_t bytes) {
    em_status err = check_alive(comm, "allgather");
    if (err) return err;
    if (send != recv) memmove(recv, send, bytes);
    return NULL;
}

static em_status local_broadcast(em_comm *comm, void *buf, size_t bytes, int root) {
    return check_alive(comm, "broadcast");
}

static em_status local_barrier(em_comm *comm) {
    return check_alive(comm, "barrier");
}

static em_status local_sendrecv(em_comm *comm, const void *send, int dest, void *recv, int source,
                                size_t bytes) {
    em_status err = check_alive(comm, "sendrecv");
    if (err) return err;
    if (send != recv) memmove(recv, send, bytes);
    return NULL;
}

static em_status local_split(em_comm *comm, int color, int key, em_comm **out) {
    em_status err = check_alive(comm, "split");
    if (err) return err;
    *out = em_comm_local_new(comm->world_ranks[0], comm->timeout_s);
    return NULL;
}

static void local_abort(em_comm *comm, const char *reason) {
    local_impl *impl = comm->impl;
    if (!impl->aborted) impl->aborted = em_xstrdup(reason ? reason : "aborted");
}

static void local_destroy(em_comm *comm) {
    local_impl *impl = comm->impl;
    free(impl->aborted);
    free(impl);
    free(comm->world_ranks);
    free(comm);
}

const em_comm_backend em_backend_local = {
    .name = "local",
    .allreduce = local_allreduce,
    .allgather = local_allgather,
    .broadcast = local_broadcast,
    .barrier = local_barrier,
    .sendrecv = local_sendrecv,
    .split = local_split,
    .abort = local_abort,
    .destroy = local_destroy,
};

em_comm *em_comm_local_new(int world_rank, double timeout_s) {
    em_comm *comm = em_xcalloc(1, sizeof *comm);
    comm->backend = &em_backend_local;
    comm->rank = 0;
    comm->size = 1;
    comm->world_ranks = em_xmalloc(sizeof(int));
    comm->world_ranks[0] = world_rank;
    comm->timeout_s = timeout_s;
    comm->impl = em_xcalloc(1, sizeof(local_impl));
    return comm;
}
