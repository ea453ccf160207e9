/* The working memory of the CPU kernels: per-thread float buffers, so each OpenMP thread converts
 * weight tiles or holds attention scores in its own memory, one shared buffer for the packed
 * activations of a matrix product, the GEMM microkernel chosen for this CPU and, in the `ggml`
 * precision, its dot-product kernel and the product's activations rounded to 8 bits, and in the
 * `bf16` precision its kernel and the product's activations rounded to BF16 pairs. Sized once for
 * the largest need of a forward pass. */
#ifndef EVALMESH_KERNELS_SCRATCH_H
#define EVALMESH_KERNELS_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

#include <omp.h>

#include "util/error.h"
#include "stages/kernels/cpu/bf16_dot.h"
#include "stages/kernels/cpu/gemm_microkernel.h"
#include "stages/kernels/cpu/ggml_dot.h"
#include "stages/kernels/cpu/q8_activations.h"

/* Work (elements, or multiply-adds for matrix products) below which a kernel runs on the calling
 * thread alone: waking a team of threads costs more, and far more on a busy machine. Whether a
 * loop runs in parallel never changes its results: each element is computed the same way. */
#define EM_PARALLEL_MIN_WORK (1 << 22)
/* The same for loops that touch each element a few times (norms, RoPE, SwiGLU, biases): a pass
 * over a (512, 768) activation is worth two threads. */
#define EM_PARALLEL_MIN_ELEMENTS (1 << 16)
/* A matrix product's work for that threshold: T x (weight elements), but at least
 * EM_WEIGHT_READ_WORK per weight element, since every element is read from memory and converted
 * (or unpacked) whatever T is. So a decoding step's products (T = 1, weights of a few hundred
 * thousand elements, bound by memory) are shared by the threads as a window's are. */
#define EM_WEIGHT_READ_WORK 16
static inline int64_t em_product_work(int T, int64_t weight_elements) {
    return (T > EM_WEIGHT_READ_WORK ? T : EM_WEIGHT_READ_WORK) * weight_elements;
}

/* How a product's loop over weight tiles (schedule(runtime)) hands them to threads: for up to
 * EM_GUIDED_TOKENS tokens (a decoding step of one sequence or of a batch of them, bound by memory)
 * in guided chunks, so that a thread's first chunk is a run of neighbouring tiles whose next rows
 * its kernel has prefetched (interleaved tiles began cold: 12 us of a 25 us product; a step of 16
 * sequences of the 110M model in Q8_0 in ggml on AMX: 660-689 -> 682-701 tokens/s); for more
 * tokens one tile at a time, which balances the threads best when tiles are computation. Results
 * never depend on it. */
#define EM_GUIDED_TOKENS 16
static inline void em_schedule_tiles(int T) {
    if (T <= EM_GUIDED_TOKENS)
        omp_set_schedule(omp_sched_guided, 0);
    else
        omp_set_schedule(omp_sched_dynamic, 1);
}

typedef struct em_scratch {
    int threads;   /* OpenMP threads the kernels use */
    size_t floats; /* capacity of each buffer */
    float **buf;   /* (threads) buffers of `floats` floats */
    size_t packed_floats;
    float *packed;               /* activations packed for em_gemm_tile, shared by the threads */
    em_gemm_microkernel *kernel; /* see em_gemm_microkernel_select */
    const char *kernel_name;
    /* precision ggml (em_scratch_use_ggml): the dot products of the weight types it covers, and
     * the activations of the current product in 8 bits; NULL: every product exact */
    const em_ggml_kernel *ggml;
    em_q8_activations q8;
    /* precision bf16 (em_scratch_use_bf16): its kernel, and the activations of the current
     * product as BF16 pairs (em_bf16_pack_panel), bf16_words words; NULL: no BF16 products */
    const em_bf16_kernel *bf16;
    uint32_t *bf16_x;
    size_t bf16_words;
} em_scratch;

/* Also chooses the GEMM microkernel: an error when EVALMESH_CPU_KERNEL names a wrong one. */
em_status em_scratch_init(em_scratch *s, int threads);
/* Makes every per-thread buffer hold at least `floats` floats and the shared one
 * `packed_floats` (an error when memory runs out). */
em_status em_scratch_reserve(em_scratch *s, size_t floats, size_t packed_floats);
/* Turns on the `ggml` precision: chooses its dot-product kernel (an error when
 * EVALMESH_CPU_KERNEL names a wrong one). */
em_status em_scratch_use_ggml(em_scratch *s);
/* Turns on the `bf16` precision: chooses its kernel (an error when EVALMESH_CPU_KERNEL names a
 * wrong one). */
em_status em_scratch_use_bf16(em_scratch *s);
/* Makes bf16_x hold at least `words` words (an error when memory runs out). */
em_status em_scratch_reserve_bf16(em_scratch *s, size_t words);
void em_scratch_free(em_scratch *s);

#endif
