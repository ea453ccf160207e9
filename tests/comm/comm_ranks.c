/* Run under mpirun (or srun --mpi=pmix) with any number of ranks: checks the bootstrap facts,
 * every collective on every dtype against values each rank computes on its own, splits, the
 * exact accumulator (same bits as a reference over the full list, whatever the world size and
 * addition order), every mesh shape of the world, and hierarchical reduction over emulated nodes
 * of unequal size (ranks 0..n-2 on "node" 0, rank n-1 alone on "node" 1).
 * Every rank checks; the exit status is nonzero when any check failed on this rank. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/comm/bootstrap.h"
#include "exact_values.h"
#include "runner/comm/control.h"
#include "runner/comm/mesh_groups.h"
#include "test.h"

static em_bootstrap boot;

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        em_status err_ = (expr);                                                                   \
        if (err_) fprintf(stderr, "rank %d: %s\n", boot.rank, err_->message);                      \
        CHECK(err_ == NULL);                                                                       \
        em_error_free(err_);                                                                       \
    } while (0)

static void check_bootstrap(void) {
    int expected = getenv("EXPECT_WORLD") ? atoi(getenv("EXPECT_WORLD")) : -1;
    if (expected > 0) CHECK_INT_EQ(boot.size, expected);
    CHECK(boot.launched == (getenv("PMIX_NAMESPACE") != NULL));
    CHECK(boot.rank >= 0 && boot.rank < boot.size);
    /* One machine: one node holding every rank. */
    CHECK_INT_EQ(boot.node_count, 1);
    CHECK_INT_EQ(boot.node_id, 0);
    CHECK_INT_EQ(boot.local_size, boot.size);
    CHECK_INT_EQ(boot.local_rank, boot.rank);
    CHECK_INT_EQ(boot.world->rank, boot.rank);
    CHECK_INT_EQ(boot.world->size, boot.size);
    for (int r = 0; r < boot.size; r++) CHECK_INT_EQ(boot.world->world_ranks[r], r);
    /* The control plane: every rank publishes a blob and reads everyone's. */
    int64_t mine[2] = {boot.rank, 1000 + 7 * boot.rank};
    CHECK_OK(em_control_put("test.blob", mine, sizeof mine));
    CHECK_OK(em_control_fence(30, "test.blob"));
    for (int r = 0; r < boot.size; r++) {
        int64_t theirs[2] = {-1, -1};
        CHECK_OK(em_control_get(r, "test.blob", theirs, sizeof theirs));
        CHECK_INT_EQ(theirs[0], r);
        CHECK_INT_EQ(theirs[1], 1000 + 7 * r);
    }
}

/* Rank r contributes value(r, i) = (r + 1) * (i + 1) - 3 * i for element i: small integers that
 * every dtype holds exactly, with both signs. */
static double value(int r, int i) {
    return (double)((r + 1) * (i + 1) - 3 * i);
}

static void check_allreduce_dtype(em_comm *comm, em_dtype dtype) {
    enum { N = 5 };
    for (int op = EM_OP_SUM; op <= EM_OP_MIN; op++) {
        double expect[N];
        for (int i = 0; i < N; i++) {
            expect[i] = op == EM_OP_SUM ? 0 : value(comm->world_ranks[0], i);
            for (int k = 0; k < comm->size; k++) {
                double v = value(comm->world_ranks[k], i);
                if (op == EM_OP_SUM) expect[i] += v;
                if (op == EM_OP_MAX && v > expect[i]) expect[i] = v;
                if (op == EM_OP_MIN && v < expect[i]) expect[i] = v;
            }
        }
        union {
            int64_t i64[N];
            uint64_t u64[N];
            double f64[N];
            float f32[N];
        } send, recv;
        int me = comm->world_ranks[comm->rank];
        for (int i = 0; i < N; i++) {
            double v = value(me, i);
            /* uint64 gets non-negative values: shift by 100. */
            if (dtype == EM_DTYPE_INT64) send.i64[i] = (int64_t)v;
            if (dtype == EM_DTYPE_UINT64) send.u64[i] = (uint64_t)(v + 100);
            if (dtype == EM_DTYPE_FLOAT64) send.f64[i] = v;
            if (dtype == EM_DTYPE_FLOAT32) send.f32[i] = (float)v;
        }
        CHECK_OK(em_allreduce(comm, &send, &recv, N, dtype, (em_reduce_op)op));
        for (int i = 0; i < N; i++) {
            double got = dtype == EM_DTYPE_INT64     ? (double)recv.i64[i]
                         : dtype == EM_DTYPE_UINT64  ? (double)recv.u64[i]
                         : dtype == EM_DTYPE_FLOAT64 ? recv.f64[i]
                                                     : (double)recv.f32[i];
            double want = expect[i];
            if (dtype == EM_DTYPE_UINT64) want += op == EM_OP_SUM ? 100.0 * comm->size : 100.0;
            if (got != want)
                fprintf(stderr, "rank %d: allreduce %s op %d element %d: got %g want %g\n",
                        boot.rank, em_dtype_name(dtype), op, i, got, want);
            CHECK(got == want);
        }
        /* In place gives the same. */
        CHECK_OK(em_allreduce(comm, &send, &send, N, dtype, (em_reduce_op)op));
        CHECK(memcmp(&send, &recv, N * em_dtype_size(dtype)) == 0);
    }
}

static void check_collectives(em_comm *comm) {
    for (int d = EM_DTYPE_INT64; d <= EM_DTYPE_FLOAT32; d++) check_allreduce_dtype(comm, d);
    /* allgather: rank k's block is (world rank, k, k's 3 low bytes), odd-sized; the bytes are
     * distinct for every rank up to 2^24 (one 'a' + k byte wrapped past 158 ranks). */
    typedef struct {
        int32_t world, rank;
        unsigned char tag[3];
    } block;
    block mine = {comm->world_ranks[comm->rank], comm->rank, {0}};
    for (int j = 0; j < 3; j++) mine.tag[j] = (unsigned char)(comm->rank >> (8 * j));
    block *all = calloc((size_t)comm->size, sizeof *all);
    CHECK_OK(em_allgather(comm, &mine, all, sizeof mine));
    for (int k = 0; k < comm->size; k++) {
        CHECK_INT_EQ(all[k].world, comm->world_ranks[k]);
        CHECK_INT_EQ(all[k].rank, k);
        for (int j = 0; j < 3; j++) CHECK_INT_EQ(all[k].tag[j], (k >> (8 * j)) & 0xff);
    }
    free(all);
    /* broadcast from every root. */
    for (int root = 0; root < comm->size; root++) {
        char text[32] = {0};
        if (comm->rank == root) snprintf(text, sizeof text, "from %d", root);
        CHECK_OK(em_broadcast(comm, text, sizeof text, root));
        char want[32] = {0};
        snprintf(want, sizeof want, "from %d", root);
        CHECK_STR_EQ(text, want);
    }
    CHECK_OK(em_barrier(comm));
}

static void check_splits(void) {
    em_comm *w = boot.world;
    /* Even and odd ranks, ordered by descending key: rank order reverses. */
    em_comm *parity = NULL;
    CHECK_OK(em_comm_split(w, w->rank % 2, -w->rank, &parity));
    if (!parity) return;
    int members = (w->size + 1 - w->rank % 2) / 2;
    CHECK_INT_EQ(parity->size, members);
    CHECK_INT_EQ(parity->world_ranks[parity->rank], w->rank);
    for (int k = 0; k + 1 < parity->size; k++)
        CHECK(parity->world_ranks[k] > parity->world_ranks[k + 1]);
    CHECK(parity->timeout_s == w->timeout_s);
    check_collectives(parity);
    /* A split of a split. */
    em_comm *single = NULL;
    CHECK_OK(em_comm_split(parity, parity->rank, 0, &single));
    if (single) {
        CHECK_INT_EQ(single->size, 1);
        check_collectives(single);
        em_comm_destroy(single);
    }
    em_comm_destroy(parity);
}

/* This rank's share of the exact-sum values: a contiguous range, added in a shuffled order. */
static void add_share(em_exact_sum *s, const double *v) {
    int lo = (int)((long)EXACT_COUNT * boot.rank / boot.size);
    int hi = (int)((long)EXACT_COUNT * (boot.rank + 1) / boot.size);
    int *order = malloc((size_t)(hi - lo) * sizeof *order);
    if (hi > lo) exact_shuffle(order, hi - lo, 100 + (uint64_t)boot.rank);
    em_exact_sum_init(s);
    for (int i = 0; i < hi - lo; i++) em_exact_sum_add(s, v[lo + order[i]]);
    free(order);
}

static void check_exact(void) {
    static double v[EXACT_COUNT];
    exact_values(v);
    double want = exact_reference(v, EXACT_COUNT);
    em_exact_sum s[2];
    add_share(&s[0], v);
    em_exact_sum_init(&s[1]);
    em_exact_sum_add(&s[1], 0.25 * (boot.rank + 1));
    CHECK_OK(em_exact_sum_allreduce(boot.world, s, 2));
    double got = em_exact_sum_value(&s[0]);
    CHECK(memcmp(&got, &want, sizeof got) == 0);
    CHECK(em_exact_sum_value(&s[1]) == 0.125 * boot.size * (boot.size + 1));
    /* The bits the reference gives for this list (pinned, so all world sizes agree). */
    uint64_t bits;
    memcpy(&bits, &got, sizeof bits);
    CHECK(bits == 0x42ba78051673a343ull);
    if (boot.rank == 0) {
        printf("exact sum over %d ranks: %.17g (bits %016llx)\n", boot.size, got,
               (unsigned long long)bits);
    }
}

/* Builds the mesh dp x tp x cp over a copy of the world and checks every group's members. */
static void check_mesh_shape(int dp, int tp, int cp) {
    em_comm *copy = NULL;
    CHECK_OK(em_comm_split(boot.world, 0, boot.rank, &copy));
    em_mesh *m = NULL;
    CHECK_OK(em_mesh_build_nodes(copy, 0, 1, dp, tp, cp, &m));
    if (!m) return;
    int r = boot.rank;
    CHECK_INT_EQ(m->node_count, 1);
    CHECK_INT_EQ(m->local_size, boot.size);
    CHECK_INT_EQ((m->dp_rank * cp + m->cp_rank) * tp + m->tp_rank, r);
    CHECK_INT_EQ(m->tp_group->size, tp);
    CHECK_INT_EQ(m->cp_group->size, cp);
    CHECK_INT_EQ(m->dp_group->size, dp);
    CHECK_INT_EQ(m->tp_group->rank, m->tp_rank);
    CHECK_INT_EQ(m->cp_group->rank, m->cp_rank);
    CHECK_INT_EQ(m->dp_group->rank, m->dp_rank);
    for (int k = 0; k < tp; k++) CHECK_INT_EQ(m->tp_group->world_ranks[k], r - m->tp_rank + k);
    for (int k = 0; k < cp; k++)
        CHECK_INT_EQ(m->cp_group->world_ranks[k], r - m->cp_rank * tp + k * tp);
    for (int k = 0; k < dp; k++)
        CHECK_INT_EQ(m->dp_group->world_ranks[k], r - m->dp_rank * tp * cp + k * tp * cp);
    /* A sum over the tp group: the sum of its world ranks. */
    int64_t mine = r, sum = 0;
    CHECK_OK(em_allreduce(m->tp_group, &mine, &sum, 1, EM_DTYPE_INT64, EM_OP_SUM));
    int64_t first = r - m->tp_rank;
    CHECK_INT_EQ(sum, tp * first + (int64_t)tp * (tp - 1) / 2);
    em_mesh_free(m);
}

static void check_meshes(void) {
    int n = boot.size;
    for (int dp = 1; dp <= n; dp++)
        for (int tp = 1; tp <= n; tp++)
            if (n % (dp * tp) == 0) check_mesh_shape(dp, tp, n / (dp * tp));
}

static void check_hierarchical(void) {
    em_comm *copy = NULL;
    CHECK_OK(em_comm_split(boot.world, 0, boot.rank, &copy));
    int n = boot.size, r = boot.rank;
    int node = n > 1 && r == n - 1 ? 1 : 0;
    em_mesh *m = NULL;
    CHECK_OK(em_mesh_build(copy, node, n, 1, 1, &m));
    if (!m) return;
    CHECK_INT_EQ(m->node_count, n > 1 ? 2 : 1);
    CHECK_INT_EQ(m->node_id, node);
    CHECK_INT_EQ(m->local_size, node == 1 ? 1 : (n > 1 ? n - 1 : 1));
    CHECK_INT_EQ(m->local_rank, node == 1 ? 0 : r);
    CHECK_INT_EQ(m->cross->size, m->local_rank == 0 ? m->node_count : 1);
    /* Told the node count instead, the groups are the same. */
    em_comm *copy2 = NULL;
    CHECK_OK(em_comm_split(boot.world, 0, boot.rank, &copy2));
    em_mesh *m2 = NULL;
    CHECK_OK(em_mesh_build_nodes(copy2, node, n > 1 ? 2 : 1, n, 1, 1, &m2));
    if (m2) {
        CHECK_INT_EQ(m2->node_count, m->node_count);
        CHECK_INT_EQ(m2->local_rank, m->local_rank);
        CHECK_INT_EQ(m2->local_size, m->local_size);
        CHECK_INT_EQ(m2->cross->size, m->cross->size);
        em_mesh_free(m2);
    }
    /* Integer sums and maxima, and float64 sums of integers: exact, like the flat all-reduce. */
    enum { N = 4 };
    int64_t in[N], out[N], flat[N];
    double fin[N], fout[N];
    for (int i = 0; i < N; i++) in[i] = (int64_t)value(r, i), fin[i] = value(r, i);
    for (int op = EM_OP_SUM; op <= EM_OP_MIN; op++) {
        CHECK_OK(em_mesh_allreduce(m, in, out, N, EM_DTYPE_INT64, (em_reduce_op)op));
        CHECK_OK(em_allreduce(boot.world, in, flat, N, EM_DTYPE_INT64, (em_reduce_op)op));
        CHECK(memcmp(out, flat, sizeof out) == 0);
    }
    CHECK_OK(em_mesh_allreduce(m, fin, fout, N, EM_DTYPE_FLOAT64, EM_OP_SUM));
    int64_t sum[N];
    CHECK_OK(em_allreduce(boot.world, in, sum, N, EM_DTYPE_INT64, EM_OP_SUM));
    for (int i = 0; i < N; i++) CHECK(fout[i] == (double)sum[i]);
    /* The exact accumulator reduced hierarchically: the reference bits. */
    static double v[EXACT_COUNT];
    exact_values(v);
    double want = exact_reference(v, EXACT_COUNT);
    em_exact_sum s;
    add_share(&s, v);
    CHECK_OK(em_mesh_exact_sum_allreduce(m, &s, 1));
    double got = em_exact_sum_value(&s);
    CHECK(memcmp(&got, &want, sizeof got) == 0);
    em_mesh_free(m);
}

int main(void) {
    em_status err = em_bootstrap_init(60, &boot);
    if (err) {
        fprintf(stderr, "bootstrap: %s\n", err->message);
        return 1;
    }
    check_bootstrap();
    check_collectives(boot.world);
    check_splits();
    check_exact();
    check_meshes();
    check_hierarchical();
    printf("rank %d of %d: ", boot.rank, boot.size);
    int rc = test_finish();
    em_bootstrap_finalize(&boot);
    return rc;
}
