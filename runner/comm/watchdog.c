/* The watchdog's helper thread and progress table (see watchdog.h for the protocol).
 * Messages on the private control communicator (a duplicate of MPI_COMM_WORLD):
 *   TAG_QUERY  int64[2] {group id, seq}  "how far are you on this group?"
 *   TAG_REPLY  int64[1] {collectives entered on that group, -1 when not a member}
 *   TAG_ABORT  char[ABORT_BYTES]          the reason of a rank that aborted */
#include "runner/comm/watchdog.h"
#include "util/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_QUERY = 101, TAG_REPLY = 102, TAG_ABORT = 103, ABORT_BYTES = 512, MAX_GROUPS = 256 };

static pthread_mutex_t mpi_mutex = PTHREAD_MUTEX_INITIALIZER;
void em_mpi_lock(void) {
    pthread_mutex_lock(&mpi_mutex);
}
void em_mpi_unlock(void) {
    pthread_mutex_unlock(&mpi_mutex);
}

/* Progress table: which groups this rank belongs to and how many collectives it entered. */
typedef struct group_progress {
    uint64_t id;
    int64_t entered;
    bool used;
} group_progress;
static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
static group_progress table[MAX_GROUPS];

static MPI_Comm control = MPI_COMM_NULL;
static pthread_t thread;
static atomic_bool running;
static atomic_bool failed;
/* Set by the helper thread when another rank's abort arrives. */
static pthread_mutex_t abort_mutex = PTHREAD_MUTEX_INITIALIZER;
static int abort_from = -1;
static char abort_reason[ABORT_BYTES];

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void em_watchdog_register(uint64_t group_id) {
    pthread_mutex_lock(&table_mutex);
    for (int i = 0; i < MAX_GROUPS; i++) {
        if (table[i].used) continue;
        table[i] = (group_progress){.id = group_id, .entered = 0, .used = true};
        break;
    }
    pthread_mutex_unlock(&table_mutex);
}

void em_watchdog_unregister(uint64_t group_id) {
    pthread_mutex_lock(&table_mutex);
    for (int i = 0; i < MAX_GROUPS; i++)
        if (table[i].used && table[i].id == group_id) table[i].used = false;
    pthread_mutex_unlock(&table_mutex);
}

void em_watchdog_entered(uint64_t group_id, int64_t seq) {
    pthread_mutex_lock(&table_mutex);
    for (int i = 0; i < MAX_GROUPS; i++)
        if (table[i].used && table[i].id == group_id) table[i].entered = seq;
    pthread_mutex_unlock(&table_mutex);
}

static int64_t entered_on(uint64_t group_id) {
    int64_t n = -1;
    pthread_mutex_lock(&table_mutex);
    for (int i = 0; i < MAX_GROUPS; i++)
        if (table[i].used && table[i].id == group_id) n = table[i].entered;
    pthread_mutex_unlock(&table_mutex);
    return n;
}

/* Tests a request under the MPI lock; true when it completed. */
static bool test_locked(MPI_Request *req, MPI_Status *status) {
    int done = 0;
    em_mpi_lock();
    MPI_Test(req, &done, status ? status : MPI_STATUS_IGNORE);
    em_mpi_unlock();
    return done != 0;
}

/* The helper thread: answers queries and records aborts until stopped. */
static void *watch(void *arg) {
    int64_t query[2];
    char reason[ABORT_BYTES];
    MPI_Request q_req, a_req;
    MPI_Request replies[64];
    int64_t reply_values[64];
    int n_replies = 0;
    em_mpi_lock();
    MPI_Irecv(query, 2, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY, control, &q_req);
    MPI_Irecv(reason, ABORT_BYTES, MPI_CHAR, MPI_ANY_SOURCE, TAG_ABORT, control, &a_req);
    em_mpi_unlock();
    while (atomic_load(&running)) {
        MPI_Status status;
        bool idle = true;
        if (test_locked(&q_req, &status)) {
            idle = false;
            /* Replies go out from a ring of 64 slots; a slot whose reply is still in flight
             * (its rank is gone) is let go before reuse. */
            int slot = n_replies++ % 64;
            em_mpi_lock();
            if (n_replies > 64 && replies[slot] != MPI_REQUEST_NULL)
                MPI_Request_free(&replies[slot]);
            reply_values[slot] = entered_on((uint64_t)query[0]);
            MPI_Isend(&reply_values[slot], 1, MPI_INT64_T, status.MPI_SOURCE, TAG_REPLY, control,
                      &replies[slot]);
            MPI_Irecv(query, 2, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY, control, &q_req);
            em_mpi_unlock();
        }
        if (test_locked(&a_req, &status)) {
            idle = false;
            reason[ABORT_BYTES - 1] = 0;
            pthread_mutex_lock(&abort_mutex);
            if (abort_from < 0) {
                abort_from = status.MPI_SOURCE;
                memcpy(abort_reason, reason, ABORT_BYTES);
            }
            pthread_mutex_unlock(&abort_mutex);
            atomic_store(&failed, true);
            em_mpi_lock();
            MPI_Irecv(reason, ABORT_BYTES, MPI_CHAR, MPI_ANY_SOURCE, TAG_ABORT, control, &a_req);
            em_mpi_unlock();
        }
        if (idle) sleep_ms(5);
    }
    em_mpi_lock();
    MPI_Cancel(&q_req);
    MPI_Wait(&q_req, MPI_STATUS_IGNORE);
    MPI_Cancel(&a_req);
    MPI_Wait(&a_req, MPI_STATUS_IGNORE);
    /* Replies to ranks that are gone may never complete: let MPI drop them. */
    for (int i = 0; i < n_replies && i < 64; i++)
        if (replies[i] != MPI_REQUEST_NULL) MPI_Request_free(&replies[i]);
    em_mpi_unlock();
    return NULL;
}

em_status em_watchdog_start(void) {
    em_mpi_lock();
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &control);
    if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
    em_mpi_unlock();
    if (rc != MPI_SUCCESS)
        return em_error_new(EM_EXIT_DISTRIBUTED, "watchdog: MPI_Comm_dup failed (%d)", rc);
    atomic_store(&running, true);
    if (pthread_create(&thread, NULL, watch, NULL) != 0) {
        atomic_store(&running, false);
        return em_error_new(EM_EXIT_FAILURE, "watchdog: cannot start its thread");
    }
    return NULL;
}

void em_watchdog_stop(void) {
    if (!atomic_load(&running)) return;
    atomic_store(&running, false);
    pthread_join(thread, NULL);
    if (!atomic_load(&failed)) {
        em_mpi_lock();
        MPI_Comm_free(&control);
        em_mpi_unlock();
    }
    control = MPI_COMM_NULL;
}

char *em_watchdog_diagnose(uint64_t group_id, int64_t seq, const int *world_ranks, int size) {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int64_t query[2] = {(int64_t)group_id, seq};
    int64_t *answers = em_xcalloc((size_t)size, sizeof *answers);
    MPI_Request *sends = em_xmalloc((size_t)size * sizeof *sends);
    MPI_Request *recvs = em_xmalloc((size_t)size * sizeof *recvs);
    em_mpi_lock();
    for (int i = 0; i < size; i++) {
        sends[i] = recvs[i] = MPI_REQUEST_NULL;
        if (world_ranks[i] == me) continue;
        MPI_Irecv(&answers[i], 1, MPI_INT64_T, world_ranks[i], TAG_REPLY, control, &recvs[i]);
        MPI_Isend(query, 2, MPI_INT64_T, world_ranks[i], TAG_QUERY, control, &sends[i]);
    }
    em_mpi_unlock();
    /* Helper threads answer within milliseconds; wait up to 2 s for the slow or the dead. */
    double deadline = em_clock_seconds() + 2.0;
    bool *answered = em_xcalloc((size_t)size, sizeof *answered);
    for (;;) {
        bool all = true;
        for (int i = 0; i < size; i++) {
            if (world_ranks[i] == me || answered[i]) continue;
            if (test_locked(&recvs[i], NULL))
                answered[i] = true;
            else
                all = false;
        }
        if (all || em_clock_seconds() > deadline) break;
        sleep_ms(5);
    }
    char *text = em_xstrdup("");
    em_mpi_lock();
    for (int i = 0; i < size; i++) {
        if (world_ranks[i] == me) continue;
        if (!answered[i]) {
            MPI_Cancel(&recvs[i]);
            MPI_Request_free(&recvs[i]);
        }
        if (sends[i] != MPI_REQUEST_NULL) MPI_Request_free(&sends[i]);
        char *part = NULL;
        if (!answered[i])
            part = em_xasprintf("rank %d did not answer (it exited or its process is stuck)",
                                world_ranks[i]);
        else if (answers[i] < seq)
            part = em_xasprintf("rank %d did not arrive (it is busy after collective %lld of "
                                "this group)",
                                world_ranks[i], (long long)(answers[i] < 0 ? 0 : answers[i]));
        if (!part) continue;
        char *joined = em_xasprintf("%s%s%s", text, text[0] ? "; " : "", part);
        free(text);
        free(part);
        text = joined;
    }
    em_mpi_unlock();
    free(answers);
    free(sends);
    free(recvs);
    free(answered);
    if (!text[0]) {
        free(text);
        text = em_xstrdup("every rank arrived, so the transport itself stalled");
    }
    return text;
}

void em_watchdog_broadcast_abort(const char *reason) {
    static atomic_bool sent;
    atomic_store(&failed, true);
    if (control == MPI_COMM_NULL || atomic_exchange(&sent, true)) return;
    int me = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Static: sends that do not complete (to dead ranks) keep pointing at it. */
    static char text[ABORT_BYTES];
    snprintf(text, ABORT_BYTES, "%s", reason);
    MPI_Request *reqs = em_xmalloc((size_t)size * sizeof *reqs);
    em_mpi_lock();
    for (int r = 0; r < size; r++) {
        reqs[r] = MPI_REQUEST_NULL;
        if (r != me) MPI_Isend(text, ABORT_BYTES, MPI_CHAR, r, TAG_ABORT, control, &reqs[r]);
    }
    em_mpi_unlock();
    double deadline = em_clock_seconds() + 0.5;
    for (int r = 0; r < size; r++)
        while (reqs[r] != MPI_REQUEST_NULL && !test_locked(&reqs[r], NULL) &&
               em_clock_seconds() < deadline)
            sleep_ms(5);
    em_mpi_lock();
    for (int r = 0; r < size; r++)
        if (reqs[r] != MPI_REQUEST_NULL) MPI_Request_free(&reqs[r]);
    em_mpi_unlock();
    free(reqs);
}

bool em_watchdog_remote_abort(int *from_rank, char **reason) {
    pthread_mutex_lock(&abort_mutex);
    bool seen = abort_from >= 0;
    if (seen) {
        *from_rank = abort_from;
        *reason = em_xstrdup(abort_reason);
    }
    pthread_mutex_unlock(&abort_mutex);
    return seen;
}

bool em_watchdog_failed(void) {
    return atomic_load(&failed);
}
