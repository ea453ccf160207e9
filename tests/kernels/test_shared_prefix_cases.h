/* Shared-prefix cases for the tests that check each continuation of a prefix against its whole
 * window (test_forward_shared_prefix.c on the cpu forward, tests/gpu/cuda_decode_check.c on the
 * cuda one): prefixes of 1 to 150 positions (inside the first attention block, on its edge,
 * across blocks) with 1 to 4 continuations of 1 to 90 positions, most scored whole and some from
 * their middle. */
#ifndef EVALMESH_TEST_SHARED_PREFIX_CASES_H
#define EVALMESH_TEST_SHARED_PREFIX_CASES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "stages/kernels/forward_backend.h"
#include "kernels/test_windows.h"

#define MOST_CONTINUATIONS 4

/* A prefix of P positions and its continuations, each of T positions scored from score_from. */
typedef struct prefix_case {
    int P, count;
    int T[MOST_CONTINUATIONS], score_from[MOST_CONTINUATIONS];
} prefix_case;

static const prefix_case cases[] = {
    {1, 1, {1}, {0}},
    {1, 3, {4, 1, 20}, {0, 0, 3}},
    {17, 2, {5, 9}, {0, 0}},
    {37, 4, {1, 64, 70, 3}, {0, 0, 0, 2}},
    {64, 3, {16, 1, 33}, {0, 0, 0}},
    {100, 4, {28, 90, 2, 7}, {0, 10, 0, 0}},
    {150, 2, {12, 45}, {0, 0}},
};
#define CASES (int)(sizeof cases / sizeof *cases)

/* Case c's whole windows: continuation i is window ws[i], its first P ids the prefix's. */
static inline void make_windows(const prefix_case *c, uint32_t seed, int V, window *ws) {
    window prefix;
    make_window(&prefix, c->P, 0, seed, V);
    for (int i = 0; i < c->count; i++) {
        make_window(&ws[i], c->P + c->T[i], c->P + c->score_from[i], seed * 7 + (uint32_t)i, V);
        memcpy(ws[i].ids, prefix.ids, (size_t)c->P * sizeof *prefix.ids);
    }
}

/* Case c's continuations order[0 .. count-1] into batch (out[i] their scores), as one prefix. */
static inline em_shared_prefix shared(const prefix_case *c, const window *ws, const int *order,
                                      int count, scores *out, em_batch_window *batch) {
    for (int k = 0; k < count; k++) {
        int i = order[k];
        const int32_t *ids = ws[i].ids + c->P;
        batch[k] =
            (em_batch_window){ids, ids + 1, c->T[i], c->score_from[i], out[i].nll, out[i].argmax};
    }
    return (em_shared_prefix){ws[0].ids, c->P, batch, count};
}

/* Whether out[i] holds the bits of want[i] for each of the case's continuations. */
static inline bool same(const prefix_case *c, const scores *want, const scores *got) {
    bool ok = true;
    for (int i = 0; i < c->count; i++) {
        size_t k = (size_t)(c->T[i] - c->score_from[i]);
        ok = ok && memcmp(want[i].nll, got[i].nll, k * sizeof(double)) == 0 &&
             memcmp(want[i].argmax, got[i].argmax, k * sizeof(int32_t)) == 0;
    }
    return ok;
}

#endif
