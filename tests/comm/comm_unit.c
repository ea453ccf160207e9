/* Single-process checks of the distributed core: dtype helpers, the local backend, the exact
 * accumulator (against an independent 128-bit reference, under shuffled orders, with carries and
 * invalid values) and the mesh shape arithmetic with its error messages. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exact_values.h"
#include "runner/comm/backend_local.h"
#include "runner/comm/exact_sum.h"
#include "runner/comm/mesh_groups.h"
#include "test.h"

static void check_local_backend(void) {
    em_comm *c = em_comm_local_new(0, 5);
    CHECK_STR_EQ(c->backend->name, "local");
    double in[3] = {1.5, -2, 3}, out[3] = {0};
    CHECK(em_allreduce(c, in, out, 3, EM_DTYPE_FLOAT64, EM_OP_SUM) == NULL);
    CHECK(memcmp(in, out, sizeof in) == 0);
    int64_t g = 0, v = 7;
    CHECK(em_allgather(c, &v, &g, sizeof v) == NULL);
    CHECK_INT_EQ(g, 7);
    em_status err = em_broadcast(c, &v, sizeof v, 1);
    CHECK(err && err->exit_code == EM_EXIT_FAILURE);
    if (err) CHECK_STR_EQ(err->message, "broadcast: root 1 is not a rank of a 1-rank group");
    em_error_free(err);
    em_comm *sub = NULL;
    CHECK(em_comm_split(c, 3, 0, &sub) == NULL);
    CHECK(sub && sub->size == 1 && sub->timeout_s == 5);
    em_comm_destroy(sub);
    em_comm_abort(c, "test abort");
    err = em_barrier(c);
    CHECK(err && err->exit_code == EM_EXIT_DISTRIBUTED);
    if (err) CHECK_STR_EQ(err->message, "barrier on an aborted communicator (test abort)");
    em_error_free(err);
    err = em_barrier(NULL);
    CHECK(err && strstr(err->message, "without a communicator"));
    em_error_free(err);
    em_comm_destroy(c);
}

static void check_exact_sum(void) {
    double v[EXACT_COUNT];
    exact_values(v);
    double want = exact_reference(v, EXACT_COUNT);
    int order[EXACT_COUNT];
    for (uint64_t seed = 1; seed <= 5; seed++) {
        exact_shuffle(order, EXACT_COUNT, seed);
        em_exact_sum s;
        em_exact_sum_init(&s);
        for (int i = 0; i < EXACT_COUNT; i++) em_exact_sum_add(&s, v[order[i]]);
        double got = em_exact_sum_value(&s);
        CHECK(memcmp(&got, &want, sizeof got) == 0);
    }
    /* Split in pieces and merged, any grouping: same bits. */
    em_exact_sum parts[3], total;
    for (int p = 0; p < 3; p++) em_exact_sum_init(&parts[p]);
    for (int i = 0; i < EXACT_COUNT; i++) em_exact_sum_add(&parts[i % 3], v[i]);
    em_exact_sum_init(&total);
    em_exact_sum_merge(&total, &parts[2]);
    em_exact_sum_merge(&total, &parts[0]);
    em_exact_sum_merge(&total, &parts[1]);
    double merged = em_exact_sum_value(&total);
    CHECK(memcmp(&merged, &want, sizeof merged) == 0);
    /* Exact small cases: 0.1 three times is 3 * round(0.1 * 2^32) units. */
    em_exact_sum s;
    em_exact_sum_init(&s);
    for (int i = 0; i < 3; i++) em_exact_sum_add(&s, 0.1);
    CHECK(em_exact_sum_value(&s) == ldexp(3 * nearbyint(ldexp(0.1, 32)), -32));
    /* Carries in both directions: +2^61, +2^-32, -2^61 leaves exactly 2^-32. */
    em_exact_sum_init(&s);
    em_exact_sum_add(&s, 0x1p61);
    em_exact_sum_add(&s, 0x1p-32);
    em_exact_sum_add(&s, -0x1p61);
    CHECK(em_exact_sum_value(&s) == 0x1p-32);
    em_exact_sum_normalize(&s);
    CHECK_INT_EQ(s.limb[0], 1);
    CHECK_INT_EQ(s.limb[1], 0);
    CHECK_INT_EQ(s.limb[2], 0);
    /* Negative totals: -1.5 is limbs {2^31, 2^32-2, -1} after normalization. */
    em_exact_sum_init(&s);
    em_exact_sum_add(&s, -1.5);
    em_exact_sum_normalize(&s);
    CHECK_INT_EQ(s.limb[0], 2147483648LL);
    CHECK_INT_EQ(s.limb[1], 4294967294LL);
    CHECK_INT_EQ(s.limb[2], -1);
    CHECK(em_exact_sum_value(&s) == -1.5);
    /* Invalid values are counted and make the value NaN. */
    em_exact_sum_add(&s, NAN);
    em_exact_sum_add(&s, INFINITY);
    em_exact_sum_add(&s, 0x1p62);
    CHECK_INT_EQ(s.invalid, 3);
    CHECK(isnan(em_exact_sum_value(&s)));
    /* Through the local backend's all-reduce the value is unchanged. */
    em_comm *c = em_comm_local_new(0, 5);
    em_exact_sum_init(&s);
    em_exact_sum_add(&s, 12.25);
    CHECK(em_exact_sum_allreduce(c, &s, 1) == NULL);
    CHECK(em_exact_sum_value(&s) == 12.25);
    em_comm_destroy(c);
}

static void check_shape(int world, int dp, int tp, int cp, const char *message, int want_dp,
                        int want_tp, int want_cp) {
    char *why = em_mesh_shape(world, &dp, &tp, &cp);
    if (message) {
        CHECK_STR_EQ(why, message);
    } else {
        CHECK(why == NULL);
        if (why) fprintf(stderr, "unexpected: %s\n", why);
        CHECK_INT_EQ(dp, want_dp);
        CHECK_INT_EQ(tp, want_tp);
        CHECK_INT_EQ(cp, want_cp);
    }
    free(why);
}

int main(void) {
    CHECK_INT_EQ(em_dtype_size(EM_DTYPE_FLOAT32), 4);
    CHECK_INT_EQ(em_dtype_size(EM_DTYPE_UINT64), 8);
    CHECK_STR_EQ(em_dtype_name(EM_DTYPE_FLOAT64), "float64");
    check_local_backend();
    check_exact_sum();
    /* 0 stands for auto. */
    check_shape(4, 0, 1, 1, NULL, 4, 1, 1);
    check_shape(12, 2, 0, 3, NULL, 2, 2, 3);
    check_shape(8, 2, 2, 0, NULL, 2, 2, 2);
    check_shape(4, 2, 3, 1, "dp*tp*cp = 2*3*1 = 6 but the world has 4 ranks", 0, 0, 0);
    check_shape(1, 1, 2, 1, "dp*tp*cp = 1*2*1 = 2 but the world has 1 rank", 0, 0, 0);
    check_shape(4, 0, 3, 1, "tp*cp = 3 does not divide the world size 4", 0, 0, 0);
    check_shape(6, 4, 1, 0, "dp*tp = 4 does not divide the world size 6", 0, 0, 0);
    check_shape(4, 0, 0, 1, "at most one of dp, tp, cp may be auto, but dp and tp are", 0, 0, 0);
    check_shape(4, 0, 0, 0, "at most one of dp, tp, cp may be auto, but dp, tp and cp are", 0, 0,
                0);
    return test_finish();
}
