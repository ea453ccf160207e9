/* Per-thread scratch buffers, the shared packed-activation buffer and the kernel choice (see
 * scratch.h). */
#include "stages/kernels/cpu/scratch.h"

#include <stdlib.h>

em_status em_scratch_init(em_scratch *s, int threads) {
    *s = (em_scratch){.threads = threads};
    s->buf = em_xcalloc((size_t)threads, sizeof(float *));
    return em_gemm_microkernel_select(&s->kernel, &s->kernel_name);
}

static float *alloc_floats(size_t floats) {
    return aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
}

em_status em_scratch_reserve(em_scratch *s, size_t floats, size_t packed_floats) {
    if (floats > s->floats) {
        for (int i = 0; i < s->threads; i++) {
            free(s->buf[i]);
            s->buf[i] = alloc_floats(floats);
            if (!s->buf[i]) {
                s->floats = 0;
                return em_error_new(EM_EXIT_RUNTIME, "out of memory: %d scratch buffers of %zu MiB",
                                    s->threads, floats * sizeof(float) >> 20);
            }
        }
        s->floats = floats;
    }
    if (packed_floats > s->packed_floats) {
        free(s->packed);
        s->packed = alloc_floats(packed_floats);
        if (!s->packed) {
            s->packed_floats = 0;
            return em_error_new(EM_EXIT_RUNTIME, "out of memory: packed activations of %zu MiB",
                                packed_floats * sizeof(float) >> 20);
        }
        s->packed_floats = packed_floats;
    }
    return NULL;
}

em_status em_scratch_use_ggml(em_scratch *s) {
    return em_ggml_kernel_select(&s->ggml);
}

em_status em_scratch_use_bf16(em_scratch *s) {
    return em_bf16_kernel_select(&s->bf16);
}

em_status em_scratch_reserve_bf16(em_scratch *s, size_t words) {
    if (words <= s->bf16_words) return NULL;
    free(s->bf16_x);
    s->bf16_x = aligned_alloc(64, (words * sizeof(uint32_t) + 63) / 64 * 64);
    s->bf16_words = s->bf16_x ? words : 0;
    if (!s->bf16_x)
        return em_error_new(EM_EXIT_RUNTIME, "out of memory: BF16 activations of %zu MiB",
                            words * sizeof(uint32_t) >> 20);
    return NULL;
}

void em_scratch_free(em_scratch *s) {
    if (!s->buf) return;
    for (int i = 0; i < s->threads; i++) free(s->buf[i]);
    free(s->buf);
    free(s->packed);
    em_q8_activations_free(&s->q8);
    free(s->bf16_x);
    *s = (em_scratch){0};
}
