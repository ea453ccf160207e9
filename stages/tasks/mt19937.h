/* The Mersenne Twister MT19937 and the two ways benchmark tools draw from it, reproduced bit for
 * bit so evalmesh picks the same choices orders and few-shot examples:
 * - NumPy's legacy RandomState(seed).permutation(n) (BIG-bench json_task.py shuffles choices
 *   with RandomState(42) re-seeded for every example);
 * - Python's random.Random(seed).sample(range(n), k) and .shuffle (lm-evaluation-harness's
 *   few-shot sampler). */
#ifndef EVALMESH_TASKS_MT19937_H
#define EVALMESH_TASKS_MT19937_H

#include <stddef.h>
#include <stdint.h>

typedef struct em_mt19937 {
    uint32_t state[624];
    int index;
} em_mt19937;

/* NumPy's RandomState(seed) for an integer seed (init_genrand). */
void em_mt19937_seed_numpy(em_mt19937 *mt, uint32_t seed);
/* Python's random.Random(seed) for a non-negative integer seed (init_by_array over its 32-bit
 * words). */
void em_mt19937_seed_python(em_mt19937 *mt, uint64_t seed);
uint32_t em_mt19937_next(em_mt19937 *mt);

/* A uniform integer in [0, max] as RandomState draws one (random_interval: masked rejection
 * sampling; no draw when max is 0): randint(0, max + 1), and choice() of max + 1 items. */
uint64_t em_numpy_interval(em_mt19937 *mt, uint64_t max);
/* out (n) = RandomState's permutation(n) from mt's current state. */
void em_numpy_permutation(em_mt19937 *mt, size_t n, size_t *out);
/* out (k) = random.sample(range(n), k) from mt's current state (k <= n). */
void em_python_sample(em_mt19937 *mt, size_t n, size_t k, size_t *out);
/* items (n) shuffled as random.shuffle does. */
void em_python_shuffle(em_mt19937 *mt, size_t *items, size_t n);

#endif
