/* The counting wrapper backend (see backend_counting.h). */
#include "runner/comm/backend_counting.h"

#include <stdlib.h>
#include <string.h>

typedef struct counting_impl {
    em_comm *inner;
    int64_t *calls;
} counting_impl;

static em_comm *inner_of(em_comm *comm) {
    counting_impl *impl = comm->impl;
    (*impl->calls)++;
    return impl->inner;
}

static em_status counting_allreduce(em_comm *comm, const void *send, void *recv, size_t count,
                                    em_dtype dtype, em_reduce_op op) {
    return em_allreduce(inner_of(comm), send, recv, count, dtype, op);
}

static em_status counting_allgather(em_comm *comm, const void *send, void *recv, size_t bytes) {
    return em_allgather(inner_of(comm), send, recv, bytes);
}

static em_status counting_broadcast(em_comm *comm, void *buf, size_t bytes, int root) {
    return em_broadcast(inner_of(comm), buf, bytes, root);
}

static em_status counting_barrier(em_comm *comm) {
    return em_barrier(inner_of(comm));
}

static em_status counting_sendrecv(em_comm *comm, const void *send, int dest, void *recv,
                                   int source, size_t bytes) {
    return em_sendrecv(inner_of(comm), send, dest, recv, source, bytes);
}

static em_status counting_split(em_comm *comm, int color, int key, em_comm **out) {
    counting_impl *impl = comm->impl;
    em_status err = em_comm_split(inner_of(comm), color, key, out);
    if (!err && *out) *out = em_comm_counting_wrap(*out, impl->calls);
    return err;
}

static void counting_abort(em_comm *comm, const char *reason) {
    counting_impl *impl = comm->impl;
    em_comm_abort(impl->inner, reason);
}

static void counting_destroy(em_comm *comm) {
    counting_impl *impl = comm->impl;
    em_comm_destroy(impl->inner);
    free(impl);
    free(comm->world_ranks);
    free(comm);
}

const em_comm_backend em_backend_counting = {
    .name = "counting",
    .allreduce = counting_allreduce,
    .allgather = counting_allgather,
    .broadcast = counting_broadcast,
    .barrier = counting_barrier,
    .sendrecv = counting_sendrecv,
    .split = counting_split,
    .abort = counting_abort,
    .destroy = counting_destroy,
};

em_comm *em_comm_counting_wrap(em_comm *inner, int64_t *calls) {
    em_comm *comm = em_xcalloc(1, sizeof *comm);
    comm->backend = &em_backend_counting;
    comm->rank = inner->rank;
    comm->size = inner->size;
    comm->world_ranks = em_xmalloc((size_t)inner->size * sizeof *comm->world_ranks);
    memcpy(comm->world_ranks, inner->world_ranks, (size_t)inner->size * sizeof *comm->world_ranks);
    comm->timeout_s = inner->timeout_s;
    counting_impl *impl = em_xcalloc(1, sizeof *impl);
    impl->inner = inner;
    impl->calls = calls;
    comm->impl = impl;
    return comm;
}
