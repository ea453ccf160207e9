/* Communicators as forward groups (see forward_group.h). */
#include "stages/kinds/support/forward_group.h"

#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static em_status group_allgather(void *link, const void *send, void *recv, size_t bytes) {
    em_forward_link *l = link;
    double start = now();
    em_status err = em_allgather(l->comm, send, recv, bytes);
    l->seconds += now() - start;
    return err;
}

static em_status group_sendrecv(void *link, const void *send, int dest, void *recv, int source,
                                size_t bytes) {
    em_forward_link *l = link;
    double start = now();
    em_status err = em_sendrecv(l->comm, send, dest, recv, source, bytes);
    l->seconds += now() - start;
    return err;
}

em_forward_group em_forward_group_of(em_forward_link *link) {
    return (em_forward_group){.rank = link->comm->rank,
                              .size = link->comm->size,
                              .comm = link,
                              .allgather = group_allgather,
                              .sendrecv = group_sendrecv};
}
