/* Batch and thread invariance of the CPU forward: a window's per-token results (nll and argmax)
 * must be bit-identical whether it runs alone or after other windows of other lengths, and with
 * 1, 2 or 16 OpenMP threads, and whichever GEMM microkernel (avx512, avx2, c) runs. Uses the model
 * given as argv[1], else the shared stories260K.gguf; argv[2] `ggml` runs precision ggml (its
 * dot-product kernels, c, avx2, avxvnni, avx512vnni and amx (avx512: the best), take the place of
 * the microkernels). (Kernels run small work on one thread: the reference test passes a model wide
 * enough that the matmul, attention and output head loops really run on 2 threads.) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/bf16_dot.h"
#include "stages/kernels/cpu/gemm_microkernel.h"
#include "stages/kernels/cpu/ggml_dot.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"
#include "test.h"
#include "kernels/test_forward_model.h"

typedef struct window {
    int length, score_from;
    int32_t ids[401]; /* inputs ids[0..length-1], targets ids[1..length] */
} window;

/* Fills w with pseudo-random ids below n_vocab. */
static void make_window(window *w, int length, int score_from, uint32_t seed, int n_vocab) {
    w->length = length;
    w->score_from = score_from;
    for (int i = 0; i <= length; i++) {
        seed = seed * 1664525u + 1013904223u;
        w->ids[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
    }
}

/* Runs the windows in order with `threads` threads; keeps the results of window `keep`. */
static em_precision precision = EM_PRECISION_EXACT;

static void run(const em_model *m, int threads, const window *ws, int count, int keep, double *nll,
                int32_t *argmax) {
    em_llama_forward *f;
    em_status err = em_llama_forward_new(m, threads, &f);
    if (!err) err = em_llama_forward_set_precision(f, precision);
    CHECK(err == NULL);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        em_error_free(err);
        return;
    }
    for (int i = 0; i < count; i++) {
        int n = ws[i].length - ws[i].score_from;
        double *wn = malloc((size_t)n * sizeof *wn);
        int32_t *wa = malloc((size_t)n * sizeof *wa);
        err = em_llama_forward_window(f, ws[i].ids, ws[i].ids + 1, ws[i].length, ws[i].score_from,
                                      wn, wa);
        CHECK(err == NULL);
        if (err) em_error_free(err);
        if (i == keep) {
            memcpy(nll, wn, (size_t)n * sizeof *wn);
            memcpy(argmax, wa, (size_t)n * sizeof *wa);
        }
        free(wn);
        free(wa);
    }
    em_llama_forward_free(f);
}

int main(int argc, char **argv) {
    em_model *m = test_forward_model(argc, argv);
    precision = test_forward_precision(argc, argv);
    int V = m->config.n_vocab;
    /* a: the window under test (five attention query blocks, long enough for the kernels to run
     * in parallel on the generated test model); b longer, c shorter */
    window ws[3];
    make_window(&ws[0], 300, 100, 1, V);
    make_window(&ws[1], 400, 0, 2, V);
    make_window(&ws[2], 9, 4, 3, V);
    window alone[1] = {ws[0]};
    window mixed[3] = {ws[1], ws[0], ws[2]};
    int n = ws[0].length - ws[0].score_from;
    double nll[5][200];
    int32_t argmax[5][200];
    run(m, 1, alone, 1, 0, nll[0], argmax[0]);
    run(m, 2, alone, 1, 0, nll[1], argmax[1]);
    run(m, 1, mixed, 3, 1, nll[2], argmax[2]);
    run(m, 2, mixed, 3, 1, nll[3], argmax[3]);
    run(m, 16, mixed, 3, 1, nll[4], argmax[4]); /* smaller weight tiles, more of them */
    for (int r = 1; r < 5; r++) {
        CHECK(memcmp(nll[0], nll[r], (size_t)n * sizeof(double)) == 0);
        CHECK(memcmp(argmax[0], argmax[r], (size_t)n * sizeof(int32_t)) == 0);
    }
    /* every kernel this CPU can run gives the same bits: the microkernels, and the rows of the
     * precision's own table (ggml: avxvnni, avx512vnni, amx; bf16: avx512bf16) */
    const char *kernels[] = {"c", "avx2", "avx512", "avxvnni", "avx512vnni", "amx", "avx512bf16"};
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
        setenv("EVALMESH_CPU_KERNEL", kernels[i], 1);
        em_gemm_microkernel *kernel;
        const char *name;
        const em_ggml_kernel *dot;
        const em_bf16_kernel *bf16;
        em_status probe = em_gemm_microkernel_select(&kernel, &name);
        if (!probe && precision == EM_PRECISION_GGML) probe = em_ggml_kernel_select(&dot);
        if (!probe && precision == EM_PRECISION_BF16) probe = em_bf16_kernel_select(&bf16);
        if (probe) {
            printf("kernel %s: not on this CPU, skipped\n", kernels[i]);
            em_error_free(probe);
            continue;
        }
        double kernel_nll[200];
        int32_t kernel_argmax[200];
        run(m, 2, mixed, 3, 1, kernel_nll, kernel_argmax);
        CHECK(memcmp(nll[0], kernel_nll, (size_t)n * sizeof(double)) == 0);
        CHECK(memcmp(argmax[0], kernel_argmax, (size_t)n * sizeof(int32_t)) == 0);
        printf("kernel %s: identical\n", kernels[i]);
    }
    unsetenv("EVALMESH_CPU_KERNEL");
    /* the results are real numbers, not a constant: some variation and all finite */
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        CHECK(nll[0][i] > 0 && nll[0][i] < 100);
        if (nll[0][i] != nll[0][0]) distinct++;
    }
    CHECK(distinct > n / 2);
    em_model_free(m);
    return test_finish();
}
