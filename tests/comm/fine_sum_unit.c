/* The fine exact sum (runner/comm/fine_sum.h): values far below exact_sum's 2^-32 kept exactly,
 * no loss to cancellation, the same bits for any order of additions or split into parts (an
 * all-reduce adds the parts' normalized limbs), the value close to a long double sum, NaN in,
 * NaN out; a one-rank all-reduce keeps the sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runner/comm/backend_local.h"
#include "runner/comm/fine_sum.h"
#include "test.h"

#define N 20000

/* A deterministic value of magnitude 2^-60 .. 2^40 and either sign. */
static double value_at(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    double mantissa = (double)(*state >> 8) / (double)(1u << 24);
    *state = *state * 1103515245u + 12345u;
    int exponent = (int)(*state >> 16) % 101 - 60;
    *state = *state * 1103515245u + 12345u;
    return ((*state >> 20) & 1 ? -1.0 : 1.0) * ldexp(0.5 + mantissa / 2, exponent);
}

static void sum_of(const double *v, const int *order, int from, int to, em_fine_sum *s) {
    memset(s, 0, sizeof *s);
    for (int i = from; i < to; i++) em_fine_sum_add(s, v[order ? order[i] : i]);
    em_fine_sum_normalize(s);
}

int main(void) {
    em_fine_sum s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < 1000; i++) em_fine_sum_add(&s, 0x1p-90);
    CHECK(em_fine_sum_value(&s) == 1000 * 0x1p-90);

    memset(&s, 0, sizeof s);
    em_fine_sum_add(&s, 1e12);
    em_fine_sum_add(&s, 0x1p-80);
    em_fine_sum_add(&s, -1e12);
    CHECK(em_fine_sum_value(&s) == 0x1p-80);

    static double v[N];
    static int order[N];
    unsigned state = 7;
    long double exact = 0;
    for (int i = 0; i < N; i++) {
        v[i] = value_at(&state);
        exact += v[i];
        order[i] = N - 1 - i;
    }
    em_fine_sum forward, backward, parts[3], merged;
    sum_of(v, NULL, 0, N, &forward);
    sum_of(v, order, 0, N, &backward);
    CHECK(memcmp(forward.limb, backward.limb, sizeof forward.limb) == 0);
    memset(&merged, 0, sizeof merged);
    int cut[4] = {0, 7001, 7002, N};
    for (int p = 0; p < 3; p++) {
        sum_of(v, order, cut[p], cut[p + 1], &parts[p]);
        for (int k = 0; k < EM_FINE_SUM_LIMBS; k++) merged.limb[k] += parts[p].limb[k];
    }
    em_fine_sum_normalize(&merged);
    CHECK(memcmp(forward.limb, merged.limb, sizeof forward.limb) == 0);
    double got = em_fine_sum_value(&forward);
    CHECK(fabsl((long double)got - exact) <= 1e-15L * fabsl(exact));

    em_comm *alone = em_comm_local_new(0, 5);
    em_fine_sum kept = forward;
    CHECK(em_fine_sum_allreduce(alone, &kept, 1) == NULL);
    CHECK(memcmp(kept.limb, forward.limb, sizeof kept.limb) == 0);
    em_comm_destroy(alone);

    em_fine_sum_add(&s, NAN);
    CHECK(isnan(em_fine_sum_value(&s)));
    return test_finish();
}
