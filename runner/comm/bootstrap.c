/* Process bootstrap (see bootstrap.h). Without PMIX_RANK and PMIX_NAMESPACE in the environment
 * no launcher started us: one rank, the `local` backend, no PMIx or MPI at all. Under a launcher:
 *   1. PMIx_Init gives rank and job size (control.c);
 *   2. every rank publishes its host name and fences (with the init timeout): this is where a
 *      rank that never started is found and named;
 *   3. MPI_Init_thread (MPI_THREAD_MULTIPLE when offered, at least SERIALIZED: all MPI calls are
 *      serialized by em_mpi_lock);
 *   4. one MPI_Allgather of the host names: node id = index of the rank's
 *      host among the hosts in order of their lowest rank, node count = number of distinct
 *      hosts, found by sorting (O(P log P) per rank; reading every rank's name from PMIx, one
 *      server round trip each, made 256 ranks on one machine spend seconds here); local
 *      rank/size from PMIX_LOCAL_RANK/PMIX_LOCAL_SIZE when the launcher gives them, else from
 *      the host list;
 *   5. the watchdog thread and the mpi world communicator. */
#include "runner/comm/bootstrap.h"

#include <mpi.h>
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/comm/backend_local.h"
#include "runner/comm/backend_mpi.h"
#include "runner/comm/control.h"
#include "runner/comm/watchdog.h"

enum { HOST_BYTES = 64 };

static bool mpi_started;

/* Every rank's host name, for finding the nodes. */
typedef struct host_of_rank {
    char name[HOST_BYTES];
    int rank;
} host_of_rank;

static int by_host_then_rank(const void *a, const void *b) {
    const host_of_rank *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* Publishes this rank's host name and waits for every rank's (the fence names missing ranks). */
static em_status publish_host(double timeout_s) {
    char host[HOST_BYTES] = {0};
    gethostname(host, sizeof host - 1);
    em_status err = em_control_put("evalmesh.host", host, sizeof host);
    return err ? err : em_control_fence(timeout_s, "evalmesh.host");
}

/* Fills node id/count and local rank/size from every rank's host name, gathered right after
 * MPI_Init (every rank passed the PMIx fence, so this waits no longer than MPI_Init itself) and
 * before the world communicator exists, whose collectives the error messages count from 1. */
static em_status find_nodes(em_bootstrap *b) {
    host_of_rank mine = {.rank = b->rank};
    gethostname(mine.name, sizeof mine.name - 1);
    host_of_rank *hosts = em_xcalloc((size_t)b->size, sizeof *hosts);
    int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, hosts, (int)sizeof mine, MPI_BYTE,
                           MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        free(hosts);
        return em_error_new(EM_EXIT_DISTRIBUTED,
                            "gathering the host names: MPI_Allgather failed (%d)", rc);
    }
    /* Sorted by host then rank, each host's ranks are one run that starts with its lowest. */
    qsort(hosts, (size_t)b->size, sizeof *hosts, by_host_then_rank);
    int my_lowest = -1;
    for (int i = 0; i < b->size; i++) {
        int first = i;
        while (i + 1 < b->size && strcmp(hosts[i + 1].name, hosts[first].name) == 0) i++;
        if (strcmp(hosts[first].name, mine.name) != 0) continue;
        my_lowest = hosts[first].rank;
        b->local_size = i - first + 1;
        for (int k = first; k <= i; k++)
            if (hosts[k].rank == b->rank) b->local_rank = k - first;
    }
    /* Nodes are numbered in order of their lowest rank. */
    b->node_count = 0;
    b->node_id = 0;
    for (int i = 0; i < b->size; i++) {
        if (i > 0 && strcmp(hosts[i - 1].name, hosts[i].name) == 0) continue;
        b->node_count++;
        if (hosts[i].rank < my_lowest) b->node_id++;
    }
    free(hosts);
    unsigned n = 0;
    if (em_control_query_u32(PMIX_LOCAL_RANK, false, &n)) b->local_rank = (int)n;
    if (em_control_query_u32(PMIX_LOCAL_SIZE, true, &n)) b->local_size = (int)n;
    return NULL;
}

static em_status start_mpi(const em_bootstrap *b) {
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
        return em_error_new(EM_EXIT_DISTRIBUTED, "MPI_Init_thread failed (%d)", rc);
    mpi_started = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED)
        return em_error_new(EM_EXIT_DISTRIBUTED,
                            "the MPI library offers only thread level %d; evalmesh needs "
                            "MPI_THREAD_SERIALIZED or more",
                            provided);
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != b->rank || size != b->size)
        return em_error_new(EM_EXIT_DISTRIBUTED,
                            "MPI sees rank %d of %d but PMIx said rank %d of %d: the MPI library "
                            "and the launcher disagree",
                            rank, size, b->rank, b->size);
    return NULL;
}

em_status em_bootstrap_init(double timeout_s, em_bootstrap *out) {
    memset(out, 0, sizeof *out);
    out->size = out->local_size = out->node_count = 1;
    out->launched = getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE");
    em_status err = em_control_init(out->launched, &out->rank, &out->size);
    if (err) return err;
    if (!out->launched) {
        out->world = em_comm_local_new(0, timeout_s);
        return NULL;
    }
    err = publish_host(timeout_s);
    if (!err) err = start_mpi(out);
    if (!err) err = find_nodes(out);
    if (!err) err = em_watchdog_start();
    if (!err) err = em_comm_mpi_world(timeout_s, &out->world);
    if (err) {
        em_bootstrap_finalize(out);
        return err;
    }
    return NULL;
}

void em_bootstrap_abort_job(int status, const char *reason) {
    fflush(stdout);
    fflush(stderr);
    if (mpi_started) MPI_Abort(MPI_COMM_WORLD, status);
    em_control_abort(status, reason);
}

void em_bootstrap_finalize(em_bootstrap *boot) {
    em_comm_destroy(boot->world);
    boot->world = NULL;
    em_watchdog_stop();
    /* MPI_Finalize waits for every rank: after a failure some may be gone, so skip it and let
     * the launcher see this process exit with its status. */
    if (mpi_started && !em_watchdog_failed()) MPI_Finalize();
    mpi_started = false;
    if (!em_watchdog_failed()) em_control_finalize();
}
