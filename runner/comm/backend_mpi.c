/* The `mpi` backend (see backend_mpi.h). Each communicator counts the collectives it entered
 * (`seq`); the watchdog reads that count when another rank asks after a timeout. Group ids: the
 * world is 1; a split child is a hash of (parent id, number of splits the parent made, color),
 * which every member computes alike. */
#include "runner/comm/backend_mpi.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner/comm/watchdog.h"
#include "util/clock.h"

typedef struct mpi_impl {
    MPI_Comm comm;
    uint64_t id;
    int64_t seq;    /* collectives entered */
    int64_t splits; /* splits made, for child ids */
    char *aborted;  /* why this communicator stopped, or NULL */
} mpi_impl;

static em_status mpi_error(const char *what, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return em_error_new(EM_EXIT_DISTRIBUTED, "%s failed: %s", what, text);
}

/* Fails when this communicator or another rank aborted. */
static em_status check_alive(em_comm *comm, const char *what) {
    mpi_impl *impl = comm->impl;
    if (impl->aborted)
        return em_error_new(EM_EXIT_DISTRIBUTED, "%s on an aborted communicator (%s)", what,
                            impl->aborted);
    int from = -1;
    char *reason = NULL;
    if (em_watchdog_remote_abort(&from, &reason)) {
        em_status err =
            em_error_new(EM_EXIT_DISTRIBUTED, "%s: rank %d aborted: %s", what, from, reason);
        impl->aborted = reason;
        return err;
    }
    return NULL;
}

/* Starts collective number seq+1 (recorded for the watchdog). */
static void enter(em_comm *comm) {
    mpi_impl *impl = comm->impl;
    impl->seq++;
    em_watchdog_entered(impl->id, impl->seq);
}

/* Polls req until it completes, another rank aborts, or the timeout passes. */
static em_status wait_request(em_comm *comm, MPI_Request *req, const char *what) {
    mpi_impl *impl = comm->impl;
    double start = em_clock_seconds(), deadline = start + comm->timeout_s;
    long polls = 0;
    for (;;) {
        int done = 0;
        em_mpi_lock();
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        em_mpi_unlock();
        if (rc != MPI_SUCCESS) return mpi_error(what, rc);
        if (done) return NULL;
        em_status err = check_alive(comm, what);
        if (err) return err;
        if (em_clock_seconds() > deadline) break;
        /* Spin briefly for small fast collectives, then back off to keep CPUs free. */
        if (++polls > 1000) {
            struct timespec ts = {0, polls > 20000 ? 1000000L : 50000L};
            nanosleep(&ts, NULL);
        }
    }
    char *who = em_watchdog_diagnose(impl->id, impl->seq, comm->world_ranks, comm->size);
    char *reason = em_xasprintf("%s (collective %lld of a %d-rank group) timed out after %g s: %s",
                                what, (long long)impl->seq, comm->size, comm->timeout_s, who);
    free(who);
    em_status err = em_error_new(EM_EXIT_DISTRIBUTED, "%s", reason);
    comm->backend->abort(comm, reason);
    free(reason);
    return err;
}

static MPI_Datatype mpi_type(em_dtype dtype) {
    switch (dtype) {
    case EM_DTYPE_INT64:
        return MPI_INT64_T;
    case EM_DTYPE_UINT64:
        return MPI_UINT64_T;
    case EM_DTYPE_FLOAT64:
        return MPI_DOUBLE;
    case EM_DTYPE_FLOAT32:
        return MPI_FLOAT;
    }
    return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(em_reduce_op op) {
    return op == EM_OP_SUM ? MPI_SUM : op == EM_OP_MAX ? MPI_MAX : MPI_MIN;
}

static em_status too_big(const char *what, size_t n) {
    return em_error_new(EM_EXIT_FAILURE, "%s of %zu elements is more than MPI's int counts allow",
                        what, n);
}

static em_status mpi_allreduce(em_comm *comm, const void *send, void *recv, size_t count,
                               em_dtype dtype, em_reduce_op op) {
    mpi_impl *impl = comm->impl;
    em_status err = check_alive(comm, "allreduce");
    if (err) return err;
    if (count > INT_MAX) return too_big("allreduce", count);
    enter(comm);
    MPI_Request req;
    em_mpi_lock();
    int rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mpi_type(dtype),
                            mpi_op(op), impl->comm, &req);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS) return mpi_error("allreduce", rc);
    return wait_request(comm, &req, "allreduce");
}

static em_status mpi_allgather(em_comm *comm, const void *send, void *recv, size_t bytes) {
    mpi_impl *impl = comm->impl;
    em_status err = check_alive(comm, "allgather");
    if (err) return err;
    if (bytes > INT_MAX) return too_big("allgather", bytes);
    enter(comm);
    const char *in_place = (const char *)recv + (size_t)comm->rank * bytes;
    MPI_Request req;
    em_mpi_lock();
    int rc = MPI_Iallgather(send == in_place ? MPI_IN_PLACE : send, (int)bytes, MPI_BYTE, recv,
                            (int)bytes, MPI_BYTE, impl->comm, &req);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS) return mpi_error("allgather", rc);
    return wait_request(comm, &req, "allgather");
}

static em_status mpi_broadcast(em_comm *comm, void *buf, size_t bytes, int root) {
    mpi_impl *impl = comm->impl;
    em_status err = check_alive(comm, "broadcast");
    if (err) return err;
    if (bytes > INT_MAX) return too_big("broadcast", bytes);
    enter(comm);
    MPI_Request req;
    em_mpi_lock();
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, impl->comm, &req);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS) return mpi_error("broadcast", rc);
    return wait_request(comm, &req, "broadcast");
}

static em_status mpi_barrier(em_comm *comm) {
    mpi_impl *impl = comm->impl;
    em_status err = check_alive(comm, "barrier");
    if (err) return err;
    enter(comm);
    MPI_Request req;
    em_mpi_lock();
    int rc = MPI_Ibarrier(impl->comm, &req);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS) return mpi_error("barrier", rc);
    return wait_request(comm, &req, "barrier");
}

/* Both halves of a ring step are nonblocking and waited for with the timeout. */
static em_status mpi_sendrecv(em_comm *comm, const void *send, int dest, void *recv, int source,
                              size_t bytes) {
    mpi_impl *impl = comm->impl;
    em_status err = check_alive(comm, "sendrecv");
    if (err) return err;
    if (bytes > INT_MAX) return too_big("sendrecv", bytes);
    enter(comm);
    MPI_Request req[2];
    em_mpi_lock();
    int rc = MPI_Irecv(recv, (int)bytes, MPI_BYTE, source, 7, impl->comm, &req[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(send, (int)bytes, MPI_BYTE, dest, 7, impl->comm, &req[1]);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS) return mpi_error("sendrecv", rc);
    err = wait_request(comm, &req[1], "sendrecv (send)");
    return err ? err : wait_request(comm, &req[0], "sendrecv (receive)");
}

/* Wraps an MPI communicator (taking it) with this group id. */
static em_status wrap(MPI_Comm handle, uint64_t id, double timeout_s, em_comm **out) {
    em_comm *comm = em_xcalloc(1, sizeof *comm);
    mpi_impl *impl = em_xcalloc(1, sizeof *impl);
    impl->comm = handle;
    impl->id = id;
    comm->backend = &em_backend_mpi;
    comm->impl = impl;
    comm->timeout_s = timeout_s;
    em_mpi_lock();
    MPI_Comm_set_errhandler(handle, MPI_ERRORS_RETURN);
    MPI_Comm_rank(handle, &comm->rank);
    MPI_Comm_size(handle, &comm->size);
    /* World rank of every member, for error messages. */
    MPI_Group group, world;
    MPI_Comm_group(handle, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *mine = em_xmalloc((size_t)comm->size * sizeof *mine);
    comm->world_ranks = em_xmalloc((size_t)comm->size * sizeof *comm->world_ranks);
    for (int i = 0; i < comm->size; i++) mine[i] = i;
    MPI_Group_translate_ranks(group, comm->size, mine, world, comm->world_ranks);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    em_mpi_unlock();
    free(mine);
    em_watchdog_register(id);
    *out = comm;
    return NULL;
}

static uint64_t child_id(uint64_t parent, int64_t split, int color) {
    /* FNV-1a over the three numbers. */
    uint64_t h = 1469598103934665603ull;
    uint64_t parts[3] = {parent, (uint64_t)split, (uint64_t)(uint32_t)color};
    for (int p = 0; p < 3; p++)
        for (int b = 0; b < 8; b++) {
            h ^= (parts[p] >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    return h | 2; /* never 0 or the world's 1 */
}

static em_status mpi_split(em_comm *comm, int color, int key, em_comm **out) {
    mpi_impl *impl = comm->impl;
    /* MPI_Comm_split blocks without a timeout: first check, with one, that every rank is here. */
    em_status err = mpi_barrier(comm);
    if (err) return em_error_prefix(err, "split");
    impl->splits++;
    MPI_Comm child;
    em_mpi_lock();
    int rc = MPI_Comm_split(impl->comm, color, key, &child);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS) return mpi_error("split", rc);
    return wrap(child, child_id(impl->id, impl->splits, color), comm->timeout_s, out);
}

static void mpi_abort(em_comm *comm, const char *reason) {
    mpi_impl *impl = comm->impl;
    if (!impl->aborted) impl->aborted = em_xstrdup(reason ? reason : "aborted");
    em_watchdog_broadcast_abort(impl->aborted);
}

static void mpi_destroy(em_comm *comm) {
    mpi_impl *impl = comm->impl;
    em_watchdog_unregister(impl->id);
    /* After a failure MPI_Comm_free could wait for dead ranks: the process is ending anyway. */
    if (!em_watchdog_failed()) {
        em_mpi_lock();
        MPI_Comm_free(&impl->comm);
        em_mpi_unlock();
    }
    free(impl->aborted);
    free(impl);
    free(comm->world_ranks);
    free(comm);
}

const em_comm_backend em_backend_mpi = {
    .name = "mpi",
    .allreduce = mpi_allreduce,
    .allgather = mpi_allgather,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .sendrecv = mpi_sendrecv,
    .split = mpi_split,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

em_status em_comm_mpi_world(double timeout_s, em_comm **out) {
    MPI_Comm dup;
    em_mpi_lock();
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS) return mpi_error("MPI_Comm_dup of the world", rc);
    return wrap(dup, 1, timeout_s, out);
}

MPI_Comm em_comm_mpi_handle(const em_comm *comm) {
    return ((const mpi_impl *)comm->impl)->comm;
}
