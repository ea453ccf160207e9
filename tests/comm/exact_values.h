/* Test values for the exact accumulator, and an independent reference sum. The values mimic
 * per-token negative log-likelihoods (0 to 30) mixed with a few large, tiny and negative ones so
 * that carries cross every limb. Every rank and every test builds the same list. */
#ifndef EVALMESH_TEST_EXACT_VALUES_H
#define EVALMESH_TEST_EXACT_VALUES_H

#include <math.h>
#include <stdint.h>

enum { EXACT_COUNT = 2003 };

static uint64_t exact_lcg(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 11;
}

/* A uniform double in [0, 1). */
static double exact_uniform(uint64_t *state) {
    return (double)exact_lcg(state) * 0x1p-53;
}

static void exact_values(double *v) {
    uint64_t s = 42;
    for (int i = 0; i < EXACT_COUNT; i++) {
        double u = exact_uniform(&s);
        v[i] = 30.0 * u;
        if (i % 97 == 0) v[i] = 3.0e12 * u;          /* large: carries into the top limb */
        if (i % 89 == 0) v[i] = -1.7e11 * u;         /* negative */
        if (i % 83 == 0) v[i] = 1e-12 * u;           /* below the resolution: rounds to 0 */
        if (i % 71 == 0) v[i] = ldexp(1.0, -33) * 3; /* exactly 1.5 units: a tie */
    }
}

/* The reference: the same rounding (to units of 2^-32, ties to even) summed in one 128-bit integer
 * in list order, then converted once. It shares no code with exact_sum.c. */
static double exact_reference(const double *v, int n) {
    __int128 total = 0;
    for (int i = 0; i < n; i++) total += (__int128)nearbyint(ldexp(v[i], 32));
    return ldexp((double)total, -32);
}

/* A permutation of 0..n-1 from a seed (Fisher-Yates). */
static void exact_shuffle(int *order, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(exact_lcg(&seed) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

#endif
