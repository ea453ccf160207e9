/* Windows of generated token ids and their per-token scores, for the tests that run the same
 * windows through forwards in different ways (alone, in batches, on another backend). */
#ifndef EVALMESH_TEST_WINDOWS_H
#define EVALMESH_TEST_WINDOWS_H

#include <stdint.h>

#define TEST_WINDOW_MAX_T 300

typedef struct window {
    int T, score_from;
    int32_t ids[TEST_WINDOW_MAX_T + 1]; /* inputs ids[0..T-1], targets ids[1..T] */
} window;

typedef struct scores {
    double nll[TEST_WINDOW_MAX_T];
    int32_t argmax[TEST_WINDOW_MAX_T];
} scores;

/* w = T + 1 ids below n_vocab from a linear congruential generator seeded with seed. */
static inline void make_window(window *w, int T, int score_from, uint32_t seed, int n_vocab) {
    w->T = T;
    w->score_from = score_from;
    for (int i = 0; i <= T; i++) {
        seed = seed * 1664525u + 1013904223u;
        w->ids[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
    }
}

#endif
