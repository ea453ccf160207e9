/* The `nccl` backend (see backend_nccl.h). Communicators are created non-blocking
 * (config.blocking = 0) so that init, split and every collective can be polled against the
 * timeout: a collective is enqueued on the communicator's stream, then cudaStreamQuery and
 * ncclCommGetAsyncError are polled until the stream is done, NCCL reports an error, or the time
 * is up. On an error or timeout the communicator is aborted (ncclCommAbort) and, when MPI runs,
 * the watchdog names the ranks that did not arrive and tells the others (watchdog.h); group ids
 * and collective counts work as in the mpi backend. Buffers in host memory (the aggregate's exact
 * sums and counts, every stage's bookkeeping) go through a device staging buffer: copied in on
 * the communicator's stream before the collective and out once it is done; device buffers (a GPU
 * forward's) are used as they are. */
#include "runner/comm/backend_nccl.h"

#include "build_info.h"

#if EVALMESH_HAVE_CUDA

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner/comm/control.h"
#include "runner/comm/watchdog.h"
#include "util/clock.h"

typedef struct nccl_impl {
    ncclComm_t comm;
    cudaStream_t stream;
    int32_t *scratch; /* device (2 * size) int32: barrier and split bookkeeping */
    char *stage;      /* device staging for host buffers, stage_bytes long */
    size_t stage_bytes;
    uint64_t id; /* group id for the watchdog */
    int64_t seq; /* collectives entered */
    int64_t splits;
    char *aborted;
} nccl_impl;

extern const em_comm_backend em_backend_nccl;

static bool mpi_running(void) {
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    return up && !down;
}

static void nccl_abort(em_comm *comm, const char *reason) {
    nccl_impl *impl = comm->impl;
    if (impl->aborted) return;
    impl->aborted = em_xstrdup(reason ? reason : "aborted");
    ncclCommAbort(impl->comm);
    impl->comm = NULL;
    if (mpi_running()) em_watchdog_broadcast_abort(impl->aborted);
}

static em_status check_alive(em_comm *comm, const char *what) {
    nccl_impl *impl = comm->impl;
    if (impl->aborted)
        return em_error_new(EM_EXIT_DISTRIBUTED, "%s on an aborted communicator (%s)", what,
                            impl->aborted);
    int from = -1;
    char *reason = NULL;
    if (mpi_running() && em_watchdog_remote_abort(&from, &reason)) {
        em_status err =
            em_error_new(EM_EXIT_DISTRIBUTED, "%s: rank %d aborted: %s", what, from, reason);
        nccl_abort(comm, reason);
        free(reason);
        return err;
    }
    return NULL;
}

/* Fails (and aborts) when an enqueue returned an error. */
static em_status nccl_result(em_comm *comm, ncclResult_t rc, const char *what) {
    if (rc == ncclSuccess || rc == ncclInProgress) return NULL;
    char *reason = em_xasprintf("%s failed: %s", what, ncclGetErrorString(rc));
    em_status err = em_error_new(EM_EXIT_DISTRIBUTED, "%s", reason);
    nccl_abort(comm, reason);
    free(reason);
    return err;
}

/* Polls until the communicator (and, when `stream_too`, its stream) is idle, an error shows up,
 * or the timeout passes. */
static em_status wait_idle(em_comm *comm, bool stream_too, const char *what) {
    nccl_impl *impl = comm->impl;
    double deadline = em_clock_seconds() + comm->timeout_s;
    for (;;) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(impl->comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) return nccl_result(comm, async, what);
        if (async == ncclSuccess) {
            cudaError_t q = stream_too ? cudaStreamQuery(impl->stream) : cudaSuccess;
            if (q == cudaSuccess) return NULL;
            if (q != cudaErrorNotReady) {
                char *reason = em_xasprintf("%s: CUDA error %s", what, cudaGetErrorString(q));
                em_status err = em_error_new(EM_EXIT_RUNTIME, "%s", reason);
                nccl_abort(comm, reason);
                free(reason);
                return err;
            }
        }
        em_status err = check_alive(comm, what);
        if (err) return err;
        if (em_clock_seconds() > deadline) break;
        struct timespec ts = {0, 100000L};
        nanosleep(&ts, NULL);
    }
    char *who = mpi_running()
                    ? em_watchdog_diagnose(impl->id, impl->seq, comm->world_ranks, comm->size)
                    : em_xstrdup("no MPI to ask which ranks arrived");
    char *reason = em_xasprintf("%s (collective %lld of a %d-rank NCCL group) timed out after "
                                "%g s: %s",
                                what, (long long)impl->seq, comm->size, comm->timeout_s, who);
    free(who);
    em_status err = em_error_new(EM_EXIT_DISTRIBUTED, "%s", reason);
    nccl_abort(comm, reason);
    free(reason);
    return err;
}

static void enter(em_comm *comm) {
    nccl_impl *impl = comm->impl;
    impl->seq++;
    em_watchdog_entered(impl->id, impl->seq);
}

/* Whether p is device (or managed) memory NCCL can use as it is. */
static bool on_device(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* a plain host pointer on an old runtime: clear the error */
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* The staging buffer, grown to at least `bytes`, with `in` (in_bytes, may be 0) copied to its
 * offset `at` on the communicator's stream. */
static em_status stage_in(em_comm *comm, size_t bytes, const void *in, size_t at, size_t in_bytes) {
    nccl_impl *impl = comm->impl;
    cudaError_t e = cudaSuccess;
    if (bytes > impl->stage_bytes) {
        cudaFree(impl->stage);
        impl->stage = NULL;
        impl->stage_bytes = 0;
        e = cudaMalloc((void **)&impl->stage, bytes);
        if (e == cudaSuccess) impl->stage_bytes = bytes;
    }
    if (e == cudaSuccess && in_bytes)
        e = cudaMemcpyAsync(impl->stage + at, in, in_bytes, cudaMemcpyHostToDevice, impl->stream);
    return e == cudaSuccess ? NULL
                            : em_error_new(EM_EXIT_RUNTIME, "nccl backend: staging %zu bytes: %s",
                                           bytes, cudaGetErrorString(e));
}

/* Copies the staged result back once the collective is done (wait_idle returned). */
static em_status stage_out(em_comm *comm, void *out, size_t bytes) {
    nccl_impl *impl = comm->impl;
    cudaError_t e = cudaMemcpy(out, impl->stage, bytes, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? NULL
                            : em_error_new(EM_EXIT_RUNTIME, "nccl backend: copying back: %s",
                                           cudaGetErrorString(e));
}

static size_t dtype_bytes(em_dtype dtype) {
    return dtype == EM_DTYPE_FLOAT32 ? 4 : 8;
}

static ncclDataType_t nccl_type(em_dtype dtype) {
    switch (dtype) {
    case EM_DTYPE_INT64:
        return ncclInt64;
    case EM_DTYPE_UINT64:
        return ncclUint64;
    case EM_DTYPE_FLOAT64:
        return ncclFloat64;
    case EM_DTYPE_FLOAT32:
        return ncclFloat32;
    }
    return ncclUint8;
}

static em_status nccl_allreduce(em_comm *comm, const void *send, void *recv, size_t count,
                                em_dtype dtype, em_reduce_op op) {
    nccl_impl *impl = comm->impl;
    em_status err = check_alive(comm, "allreduce");
    if (err) return err;
    size_t bytes = count * dtype_bytes(dtype);
    bool host = !on_device(send) || !on_device(recv);
    if (host && (err = stage_in(comm, bytes, send, 0, bytes))) return err;
    enter(comm);
    ncclRedOp_t nop = op == EM_OP_SUM ? ncclSum : op == EM_OP_MAX ? ncclMax : ncclMin;
    const void *s = host ? impl->stage : send;
    void *r = host ? impl->stage : recv;
    err = nccl_result(comm,
                      ncclAllReduce(s, r, count, nccl_type(dtype), nop, impl->comm, impl->stream),
                      "allreduce");
    if (!err) err = wait_idle(comm, true, "allreduce");
    return err || !host ? err : stage_out(comm, recv, bytes);
}

/* recv is size * bytes; host buffers are gathered in place in the staging buffer. */
static em_status nccl_allgather(em_comm *comm, const void *send, void *recv, size_t bytes) {
    nccl_impl *impl = comm->impl;
    em_status err = check_alive(comm, "allgather");
    if (err) return err;
    size_t all = bytes * (size_t)comm->size, at = bytes * (size_t)comm->rank;
    bool host = !on_device(send) || !on_device(recv);
    if (host && (err = stage_in(comm, all, send, at, bytes))) return err;
    enter(comm);
    const void *s = host ? impl->stage + at : send;
    void *r = host ? impl->stage : recv;
    err = nccl_result(comm, ncclAllGather(s, r, bytes, ncclUint8, impl->comm, impl->stream),
                      "allgather");
    if (!err) err = wait_idle(comm, true, "allgather");
    return err || !host ? err : stage_out(comm, recv, all);
}

static em_status nccl_broadcast(em_comm *comm, void *buf, size_t bytes, int root) {
    nccl_impl *impl = comm->impl;
    em_status err = check_alive(comm, "broadcast");
    if (err) return err;
    bool host = !on_device(buf);
    if (host && (err = stage_in(comm, bytes, buf, 0, bytes))) return err;
    enter(comm);
    void *b = host ? impl->stage : buf;
    err = nccl_result(comm, ncclBroadcast(b, b, bytes, ncclUint8, root, impl->comm, impl->stream),
                      "broadcast");
    if (!err) err = wait_idle(comm, true, "broadcast");
    return err || !host ? err : stage_out(comm, buf, bytes);
}

/* Host buffers: send staged at 0, received at `bytes`. */
static em_status nccl_sendrecv(em_comm *comm, const void *send, int dest, void *recv, int source,
                               size_t bytes) {
    nccl_impl *impl = comm->impl;
    em_status err = check_alive(comm, "sendrecv");
    if (err) return err;
    bool host = !on_device(send) || !on_device(recv);
    if (host && (err = stage_in(comm, 2 * bytes, send, 0, bytes))) return err;
    enter(comm);
    const void *s = host ? impl->stage : send;
    void *r = host ? impl->stage + bytes : recv;
    ncclResult_t rc = ncclGroupStart();
    if (rc == ncclSuccess) rc = ncclSend(s, bytes, ncclUint8, dest, impl->comm, impl->stream);
    if (rc == ncclSuccess) rc = ncclRecv(r, bytes, ncclUint8, source, impl->comm, impl->stream);
    ncclResult_t end = ncclGroupEnd();
    err = nccl_result(comm, rc == ncclSuccess ? end : rc, "sendrecv");
    if (!err) err = wait_idle(comm, true, "sendrecv");
    if (err || !host) return err;
    cudaError_t e = cudaMemcpy(recv, impl->stage + bytes, bytes, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? NULL
                            : em_error_new(EM_EXIT_RUNTIME, "nccl backend: copying back: %s",
                                           cudaGetErrorString(e));
}

static em_status nccl_barrier(em_comm *comm) {
    nccl_impl *impl = comm->impl;
    return nccl_allreduce(comm, impl->scratch, impl->scratch, 1, EM_DTYPE_FLOAT32, EM_OP_SUM);
}

static uint64_t child_id(uint64_t parent, int64_t split, int color) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a, as in the mpi backend */
    uint64_t parts[3] = {parent, (uint64_t)split, (uint64_t)(uint32_t)color};
    for (int p = 0; p < 3; p++)
        for (int b = 0; b < 8; b++) {
            h ^= (parts[p] >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    return h | 2;
}

/* A new em_comm around an NCCL communicator; the stream and scratch are made here. */
static em_status wrap(ncclComm_t handle, int rank, int size, int *world_ranks, uint64_t id,
                      double timeout_s, em_comm **out) {
    em_comm *comm = em_xcalloc(1, sizeof *comm);
    nccl_impl *impl = em_xcalloc(1, sizeof *impl);
    impl->comm = handle;
    impl->id = id;
    comm->backend = &em_backend_nccl;
    comm->impl = impl;
    comm->rank = rank;
    comm->size = size;
    comm->world_ranks = world_ranks;
    comm->timeout_s = timeout_s;
    cudaError_t ce = cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&impl->scratch, 2 * (size_t)size * 4);
    if (ce == cudaSuccess) ce = cudaMemset(impl->scratch, 0, 2 * (size_t)size * 4);
    em_watchdog_register(id);
    *out = comm;
    if (ce != cudaSuccess)
        return em_error_new(EM_EXIT_RUNTIME, "nccl backend: CUDA stream or buffer: %s",
                            cudaGetErrorString(ce));
    return NULL;
}

static em_status nccl_split(em_comm *comm, int color, int key, em_comm **out) {
    nccl_impl *impl = comm->impl;
    *out = NULL;
    /* Every member's (color, key), gathered on the GPU, gives the new group's members. */
    int32_t mine[2] = {color, key};
    int32_t *all = em_xmalloc(2 * (size_t)comm->size * sizeof *all);
    cudaMemcpy(impl->scratch + 2 * comm->rank, mine, sizeof mine, cudaMemcpyHostToDevice);
    em_status err =
        nccl_allgather(comm, impl->scratch + 2 * comm->rank, impl->scratch, sizeof mine);
    if (!err) cudaMemcpy(all, impl->scratch, 2 * (size_t)comm->size * 4, cudaMemcpyDeviceToHost);
    if (err) {
        free(all);
        return em_error_prefix(err, "split");
    }
    int n = 0, my_index = 0;
    int *members = em_xmalloc((size_t)comm->size * sizeof *members);
    for (int r = 0; r < comm->size; r++) {
        if (all[2 * r] != color) continue;
        /* insertion by (key, old rank) */
        int at = n++;
        while (at > 0 && all[2 * members[at - 1] + 1] > all[2 * r + 1]) {
            members[at] = members[at - 1];
            at--;
        }
        members[at] = r;
    }
    int *world_ranks = em_xmalloc((size_t)n * sizeof *world_ranks);
    for (int i = 0; i < n; i++) {
        world_ranks[i] = comm->world_ranks[members[i]];
        if (members[i] == comm->rank) my_index = i;
    }
    free(members);
    free(all);
    impl->splits++;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = NULL;
    err = nccl_result(comm, ncclCommSplit(impl->comm, color, key, &child, &config), "split");
    if (!err) err = wait_idle(comm, false, "split");
    if (err) {
        free(world_ranks);
        return err;
    }
    /* The child finishes initialising on its own: wait for it too. */
    em_comm *made = NULL;
    err = wrap(child, my_index, n, world_ranks, child_id(impl->id, impl->splits, color),
               comm->timeout_s, &made);
    if (!err) err = wait_idle(made, false, "split (new communicator)");
    if (err) {
        em_comm_destroy(made);
        return err;
    }
    *out = made;
    return NULL;
}

static void nccl_destroy(em_comm *comm) {
    nccl_impl *impl = comm->impl;
    em_watchdog_unregister(impl->id);
    if (impl->comm) ncclCommDestroy(impl->comm);
    if (impl->stream) cudaStreamDestroy(impl->stream);
    cudaFree(impl->scratch);
    cudaFree(impl->stage);
    free(impl->aborted);
    free(impl);
    free(comm->world_ranks);
    free(comm);
}

const em_comm_backend em_backend_nccl = {
    .name = "nccl",
    .allreduce = nccl_allreduce,
    .allgather = nccl_allgather,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .sendrecv = nccl_sendrecv,
    .split = nccl_split,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

em_status em_comm_nccl_everywhere(em_comm *world, bool *everywhere) {
    int devices = 0;
    int32_t mine = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    int32_t *all = em_xmalloc((size_t)world->size * sizeof *all);
    em_status err = em_allgather(world, &mine, all, sizeof mine);
    *everywhere = !err;
    for (int r = 0; r < world->size && !err; r++) *everywhere = *everywhere && all[r];
    free(all);
    return err;
}

em_status em_comm_nccl_world(em_comm *cpu_world, int local_rank, double timeout_s, em_comm **out) {
    *out = NULL;
    int rank = cpu_world ? cpu_world->rank : 0;
    int size = cpu_world ? cpu_world->size : 1;
    /* Every rank must see a GPU; they agree before anyone waits for NCCL. */
    int devices = 0;
    cudaError_t ce = cudaGetDeviceCount(&devices);
    int32_t ok = ce == cudaSuccess && devices > 0;
    int32_t *oks = em_xmalloc((size_t)size * sizeof *oks);
    oks[rank] = ok;
    em_status err = size > 1 ? em_allgather(cpu_world, &ok, oks, sizeof ok) : NULL;
    if (err) {
        free(oks);
        return em_error_prefix(err, "nccl backend");
    }
    if (!ok) {
        free(oks);
        return em_error_new(EM_EXIT_RUNTIME,
                            "nccl backend: no CUDA device visible on rank %d "
                            "(cudaGetDeviceCount: %s)",
                            rank, ce == cudaSuccess ? "0 devices" : cudaGetErrorString(ce));
    }
    for (int r = 0; r < size; r++) {
        if (oks[r]) continue;
        free(oks);
        return em_error_new(EM_EXIT_RUNTIME, "nccl backend: no CUDA device visible on rank %d", r);
    }
    free(oks);
    ce = cudaSetDevice(local_rank % devices);
    if (ce != cudaSuccess)
        return em_error_new(EM_EXIT_RUNTIME, "nccl backend: cudaSetDevice(%d) on rank %d: %s",
                            local_rank % devices, rank, cudaGetErrorString(ce));

    /* Rank 0's unique id through the control plane; a fresh key for each NCCL world. */
    static int worlds;
    char key[64];
    snprintf(key, sizeof key, "evalmesh.nccl.id.%d", worlds++);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) {
        ncclResult_t rc = ncclGetUniqueId(&id);
        if (rc != ncclSuccess)
            return em_error_new(EM_EXIT_RUNTIME, "nccl backend: ncclGetUniqueId: %s",
                                ncclGetErrorString(rc));
        err = em_control_put(key, &id, sizeof id);
    }
    if (!err) err = em_control_fence(timeout_s, NULL);
    if (!err) err = em_control_get(0, key, &id, sizeof id);
    if (err) return em_error_prefix(err, "nccl backend: sharing the NCCL unique id");

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t handle = NULL;
    ncclResult_t rc = ncclCommInitRankConfig(&handle, size, id, rank, &config);
    int *world_ranks = em_xmalloc((size_t)size * sizeof *world_ranks);
    for (int r = 0; r < size; r++) world_ranks[r] = r;
    em_comm *comm = NULL;
    err = wrap(handle, rank, size, world_ranks, 0x6e63636cull /* "nccl" */, timeout_s, &comm);
    if (!err) err = nccl_result(comm, rc, "ncclCommInitRank");
    if (!err) err = wait_idle(comm, false, "ncclCommInitRank");
    if (err) {
        em_comm_destroy(comm);
        return em_error_prefix(err, "nccl backend");
    }
    *out = comm;
    return NULL;
}

#else

em_status em_comm_nccl_everywhere(em_comm *world, bool *everywhere) {
    *everywhere = false;
    return NULL;
}

em_status em_comm_nccl_world(em_comm *cpu_world, int local_rank, double timeout_s, em_comm **out) {
    *out = NULL;
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "nccl backend: this evalmesh was built without CUDA and NCCL "
                        "(its backends: %s)",
                        EVALMESH_BACKENDS);
}

#endif
