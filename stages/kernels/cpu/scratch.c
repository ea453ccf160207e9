/* Per-thread scratch buffers (see scratch.h). */
#include "stages/kernels/cpu/scratch.h"

#include <stdlib.h>

void em_scratch_init(em_scratch *s, int threads) {
    s->threads = threads;
    s->floats = 0;
    s->buf = em_xcalloc((size_t)threads, sizeof(float *));
}

em_status em_scratch_reserve(em_scratch *s, size_t floats) {
    if (floats <= s->floats) return NULL;
    for (int i = 0; i < s->threads; i++) {
        free(s->buf[i]);
        s->buf[i] = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
        if (!s->buf[i]) {
            s->floats = 0;
            return em_error_new(EM_EXIT_RUNTIME, "out of memory: %d scratch buffers of %zu MiB",
                                s->threads, floats * sizeof(float) >> 20);
        }
    }
    s->floats = floats;
    return NULL;
}

void em_scratch_free(em_scratch *s) {
    if (!s->buf) return;
    for (int i = 0; i < s->threads; i++) free(s->buf[i]);
    free(s->buf);
    s->buf = NULL;
    s->floats = 0;
}
