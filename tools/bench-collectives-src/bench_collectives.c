/* Run under mpirun by tools/bench-collectives: the latency of every collective one `evalmesh
 * perplexity` evaluation performs on one node with the default mesh (dp over the world), each
 * through the same evalmesh function the evaluation calls, with the payload it sends. Prints,
 * from rank 0, one line per row: "P <ranks> <row> <calls per evaluation> <seconds per call>",
 * the seconds being the slowest rank's mean over `iters` calls (the bootstrap: its one call).
 * Usage: bench_collectives [ITERS] (default 20). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/bootstrap.h"
#include "runner/comm/exact_sum.h"
#include "runner/comm/mesh_groups.h"
#include "util/clock.h"

enum { COUNTS = 5, RUN_DIR_MESSAGE = 4096, CORPUS_HEADER = 80, TOKEN_STREAM = 1883 * 4 };

typedef struct bench {
    em_bootstrap boot;
    em_mesh *mesh;
    char buffer[TOKEN_STREAM];
    char *gathered;
} bench;

static em_status mesh_build(bench *b) {
    em_comm *world = NULL;
    em_mesh *m = NULL;
    em_status err = em_comm_split(b->boot.world, 0, b->boot.rank, &world);
    if (!err)
        err =
            em_mesh_build_nodes(world, b->boot.node_id, b->boot.node_count, b->boot.size, 1, 1, &m);
    em_mesh_free(m);
    return err;
}

static em_status agree(bench *b) {
    return em_allgather(b->boot.world, b->buffer, b->gathered, sizeof(int32_t));
}

static em_status broadcast_run_dir(bench *b) {
    return em_broadcast(b->boot.world, b->buffer, RUN_DIR_MESSAGE, 0);
}

static em_status broadcast_corpus_header(bench *b) {
    return em_broadcast(b->boot.world, b->buffer, CORPUS_HEADER, 0);
}

static em_status broadcast_tokens(bench *b) {
    return em_broadcast(b->boot.world, b->buffer, TOKEN_STREAM, 0);
}

static em_status exact_sums(bench *b) {
    em_exact_sum sums[2];
    em_exact_sum_init(&sums[0]);
    em_exact_sum_init(&sums[1]);
    em_exact_sum_add(&sums[0], 1.5 * b->boot.rank);
    em_exact_sum_add(&sums[1], 0.25);
    return em_mesh_dp_exact_sum_allreduce(b->mesh, sums, 2);
}

static em_status counts(bench *b) {
    int64_t c[COUNTS] = {b->boot.rank, 1, 2, 3, 4};
    return em_mesh_dp_allreduce(b->mesh, c, c, COUNTS, EM_DTYPE_INT64, EM_OP_SUM);
}

static em_status gather_work(bench *b) {
    return em_allgather(b->mesh->dp_group, b->buffer, b->gathered, 3 * sizeof(int64_t));
}

static em_status gather_window_counts(bench *b) {
    return em_allgather(b->mesh->dp_group, b->buffer, b->gathered, sizeof(int64_t));
}

static em_status gather_window_nll(bench *b) {
    return em_allgather(b->mesh->dp_group, b->buffer, b->gathered, 2 * sizeof(double));
}

/* One row per collective of an evaluation, in the order the evaluation calls them. */
static const struct {
    const char *name;
    int per_evaluation;
    em_status (*run)(bench *b);
} rows[] = {
    {"agree_allgather_4B", 3, agree},                     /* runner/session.c: 3 steps */
    {"mesh_build_8_splits", 1, mesh_build},               /* runner/session.c default_mesh */
    {"broadcast_run_dir_4KiB", 1, broadcast_run_dir},     /* runner/run_dir.c */
    {"broadcast_corpus_80B", 2, broadcast_corpus_header}, /* dataset header, document table */
    {"broadcast_tokens_7KiB", 1, broadcast_tokens},       /* dataset token stream */
    {"exact_sum_allreduce", 1, exact_sums},               /* aggregate: the fixed-point sums */
    {"counts_allreduce", 1, counts},                      /* aggregate: int64 counts */
    {"allgather_work_24B", 1, gather_work},               /* aggregate: per-rank work */
    {"allgather_windows_8B", 1, gather_window_counts},    /* aggregate: window counts */
    {"allgather_nll_16B", 1, gather_window_nll},          /* aggregate: window NLL */
};

/* The slowest rank's value of `mine`. */
static double slowest(bench *b, double mine) {
    double worst = mine;
    em_status err = em_allreduce(b->boot.world, &mine, &worst, 1, EM_DTYPE_FLOAT64, EM_OP_MAX);
    if (err) {
        fprintf(stderr, "rank %d: %s\n", b->boot.rank, err->message);
        exit(1);
    }
    return worst;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    if (iters < 1) {
        fprintf(stderr, "usage: bench_collectives [ITERS >= 1]\n");
        return 2;
    }
    static bench b;
    double start = em_clock_seconds();
    em_status err = em_bootstrap_init(600, &b.boot);
    double bootstrap = em_clock_seconds() - start;
    if (!err) {
        em_comm *world = NULL;
        err = em_comm_split(b.boot.world, 0, b.boot.rank, &world);
        if (!err)
            err = em_mesh_build_nodes(world, b.boot.node_id, b.boot.node_count, b.boot.size, 1, 1,
                                      &b.mesh);
    }
    if (err) {
        fprintf(stderr, "bench_collectives: %s\n", err->message);
        return 1;
    }
    b.gathered = calloc((size_t)b.boot.size, 64);
    int p = b.boot.size;
    double boot_worst = slowest(&b, bootstrap);
    if (b.boot.rank == 0) printf("P %d bootstrap 1 %.9f\n", p, boot_worst);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int i = 0; i < 2 && !err; i++) err = rows[r].run(&b);
        if (!err) err = em_barrier(b.boot.world);
        double t0 = em_clock_seconds();
        for (int i = 0; i < iters && !err; i++) err = rows[r].run(&b);
        double mine = (em_clock_seconds() - t0) / iters;
        if (err) {
            fprintf(stderr, "rank %d: %s: %s\n", b.boot.rank, rows[r].name, err->message);
            return 1;
        }
        double worst = slowest(&b, mine);
        if (b.boot.rank == 0)
            printf("P %d %s %d %.9f\n", p, rows[r].name, rows[r].per_evaluation, worst);
    }
    fflush(stdout);
    free(b.gathered);
    em_mesh_free(b.mesh);
    em_bootstrap_finalize(&b.boot);
    return 0;
}
