/* Per-thread float scratch buffers, so each OpenMP thread converts weight tiles or holds
 * attention scores in its own memory. Sized once for the largest need of a forward pass. */
#ifndef EVALMESH_KERNELS_SCRATCH_H
#define EVALMESH_KERNELS_SCRATCH_H

#include <stddef.h>

#include "runner/util/error.h"

/* Work (elements, or multiply-adds for matrix products) below which a kernel runs on the calling
 * thread alone: waking a team of threads costs more, and far more on a busy machine. Whether a
 * loop runs in parallel never changes its results: each element is computed the same way. */
#define EM_PARALLEL_MIN_WORK (1 << 22)

typedef struct em_scratch {
    int threads;   /* OpenMP threads the kernels use */
    size_t floats; /* capacity of each buffer */
    float **buf;   /* (threads) buffers of `floats` floats */
} em_scratch;

void em_scratch_init(em_scratch *s, int threads);
/* Makes every buffer hold at least `floats` floats (an error when memory runs out). */
em_status em_scratch_reserve(em_scratch *s, size_t floats);
void em_scratch_free(em_scratch *s);

#endif
