/* MT19937 (Matsumoto and Nishimura's reference generator) with NumPy's and CPython's seeding, and
 * the draws built on it exactly as numpy/random (legacy RandomState: random_interval's masked
 * rejection sampling) and CPython 3.11's random.py (_randbelow from getrandbits, sample's two
 * branches, shuffle) make them. */
#include "stages/tasks/mt19937.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/error.h"

enum { MT_N = 624, MT_M = 397 };

static void init_genrand(em_mt19937 *mt, uint32_t seed) {
    mt->state[0] = seed;
    for (int i = 1; i < MT_N; i++) {
        uint32_t prev = mt->state[i - 1];
        mt->state[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
    }
    mt->index = MT_N;
}

void em_mt19937_seed_numpy(em_mt19937 *mt, uint32_t seed) {
    init_genrand(mt, seed);
}

void em_mt19937_seed_python(em_mt19937 *mt, uint64_t seed) {
    /* random_seed in CPython's _randommodule.c: the seed's 32-bit words, least significant
     * first; 0 is the one word 0. */
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int key_length = key[1] ? 2 : 1;
    init_genrand(mt, 19650218u);
    uint32_t *s = mt->state;
    int i = 1, j = 0;
    for (int k = MT_N > key_length ? MT_N : key_length; k; k--) {
        s[i] = (s[i] ^ ((s[i - 1] ^ (s[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++, j++;
        if (i >= MT_N) {
            s[0] = s[MT_N - 1];
            i = 1;
        }
        if (j >= key_length) j = 0;
    }
    for (int k = MT_N - 1; k; k--) {
        s[i] = (s[i] ^ ((s[i - 1] ^ (s[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_N) {
            s[0] = s[MT_N - 1];
            i = 1;
        }
    }
    s[0] = 0x80000000u;
    mt->index = MT_N;
}

/* Regenerates all 624 words. */
static void twist(em_mt19937 *mt) {
    uint32_t *s = mt->state;
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (s[i] & 0x80000000u) | (s[(i + 1) % MT_N] & 0x7fffffffu);
        s[i] = s[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    mt->index = 0;
}

uint32_t em_mt19937_next(em_mt19937 *mt) {
    if (mt->index >= MT_N) twist(mt);
    uint32_t y = mt->state[mt->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t em_numpy_interval(em_mt19937 *mt, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
    uint64_t value;
    if (max <= 0xffffffffu) {
        do {
            value = em_mt19937_next(mt) & mask;
        } while (value > max);
    } else {
        do { /* next_uint64: the high word first */
            uint64_t hi = em_mt19937_next(mt);
            value = ((hi << 32) | em_mt19937_next(mt)) & mask;
        } while (value > max);
    }
    return value;
}

void em_numpy_permutation(em_mt19937 *mt, size_t n, size_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = i;
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)em_numpy_interval(mt, i);
        size_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

/* getrandbits(k) for 0 < k <= 64: 32-bit words, least significant first, the last one shifted
 * down to the bits still wanted. */
static uint64_t python_getrandbits(em_mt19937 *mt, int k) {
    if (k <= 32) return em_mt19937_next(mt) >> (32 - k);
    uint64_t low = em_mt19937_next(mt);
    uint64_t high = em_mt19937_next(mt) >> (64 - k);
    return low | (high << 32);
}

/* _randbelow_with_getrandbits(n), n >= 1: k = n.bit_length() bits until the value is below n. */
static size_t python_randbelow(em_mt19937 *mt, size_t n) {
    int k = 0;
    for (uint64_t v = n; v; v >>= 1) k++;
    uint64_t r;
    do {
        r = python_getrandbits(mt, k);
    } while (r >= n);
    return (size_t)r;
}

void em_python_sample(em_mt19937 *mt, size_t n, size_t k, size_t *out) {
    /* random.sample: a pool when an n-long list is smaller than a k-element set would be (the
     * set's table size as CPython estimates it), else draws rejected while already selected. */
    double setsize = 21;
    if (k > 5) setsize += pow(4, ceil(log((double)k * 3) / log(4)));
    if ((double)n <= setsize) {
        size_t *pool = em_xmalloc((n ? n : 1) * sizeof *pool);
        for (size_t i = 0; i < n; i++) pool[i] = i;
        for (size_t i = 0; i < k; i++) {
            size_t j = python_randbelow(mt, n - i);
            out[i] = pool[j];
            pool[j] = pool[n - i - 1];
        }
        free(pool);
        return;
    }
    bool *selected = em_xcalloc(n, sizeof *selected);
    for (size_t i = 0; i < k; i++) {
        size_t j;
        do {
            j = python_randbelow(mt, n);
        } while (selected[j]);
        selected[j] = true;
        out[i] = j;
    }
    free(selected);
}

void em_python_shuffle(em_mt19937 *mt, size_t *items, size_t n) {
    for (size_t i = n; i-- > 1;) {
        size_t j = python_randbelow(mt, i + 1);
        size_t t = items[i];
        items[i] = items[j];
        items[j] = t;
    }
}
