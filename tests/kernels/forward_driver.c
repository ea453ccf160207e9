/* Test driver for the CPU forward: loads a model, runs one window and prints, per scored
 * position, "position nll argmax" (nll with 17 significant digits) so a NumPy reference can
 * check it. Usage: forward_driver [--ggml|--bf16] [--dump FILE] MODEL THREADS SCORE_FROM ID0 ID1
 * ... IDN (inputs are ID0..ID(N-1), targets ID1..IDN; --ggml, --bf16: that precision; --dump: every
 * linear layer's input as the observer of linear_inputs.h sees it, into FILE: per call int32 layer,
 * site, T, K, then T x K float32, row-major). Errors go to stderr with their exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"

/* Appends one site's input to the FILE * in user. */
static void dump(void *user, int layer, em_linear_site site, const em_linear_input *x) {
    int32_t head[4] = {layer, (int32_t)site, x->T, x->K};
    fwrite(head, sizeof head, 1, user);
    for (int t = 0; t < x->T; t++) {
        for (int k = 0; k < x->K; k++) {
            float v = em_linear_input_at(x, t, k);
            fwrite(&v, sizeof v, 1, user);
        }
    }
}

static int fail(em_status err) {
    fprintf(stderr, "error: %s\n", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}

int main(int argc, char **argv) {
    bool ggml = argc > 1 && strcmp(argv[1], "--ggml") == 0;
    bool bf16 = argc > 1 && strcmp(argv[1], "--bf16") == 0;
    if (ggml || bf16) {
        argv++;
        argc--;
    }
    FILE *dumped = NULL;
    if (argc > 2 && strcmp(argv[1], "--dump") == 0) {
        dumped = fopen(argv[2], "wb");
        if (!dumped) {
            fprintf(stderr, "error: cannot write %s\n", argv[2]);
            return 2;
        }
        argv += 2;
        argc -= 2;
    }
    if (argc < 6) {
        fprintf(
            stderr,
            "usage: %s [--ggml|--bf16] [--dump FILE] MODEL THREADS SCORE_FROM ID0 ID1 [ID...]\n",
            argv[0]);
        return 2;
    }
    int threads = atoi(argv[2]), score_from = atoi(argv[3]);
    int T = argc - 5;
    int32_t *ids = malloc((size_t)(T + 1) * sizeof *ids);
    for (int i = 0; i <= T; i++) ids[i] = (int32_t)strtol(argv[4 + i], NULL, 10);
    em_model *model;
    em_status err = em_model_load(argv[1], &model);
    if (err) {
        free(ids);
        return fail(err);
    }
    em_llama_forward *f;
    err = em_llama_forward_new(model, threads, &f);
    if (!err && ggml) err = em_llama_forward_set_precision(f, EM_PRECISION_GGML);
    if (!err && bf16) err = em_llama_forward_set_precision(f, EM_PRECISION_BF16);
    em_linear_observer observer = {dump, dumped};
    if (!err && dumped) em_llama_forward_observe(f, &observer);
    int n = T - score_from > 0 ? T - score_from : 1;
    double *nll = malloc((size_t)n * sizeof *nll);
    int32_t *argmax = malloc((size_t)n * sizeof *argmax);
    if (!err) err = em_llama_forward_window(f, ids, ids + 1, T, score_from, nll, argmax);
    int code = 0;
    if (err) {
        code = fail(err);
    } else {
        for (int i = 0; i < T - score_from; i++) {
            printf("%d %.17g %d\n", score_from + i, nll[i], argmax[i]);
        }
    }
    em_llama_forward_free(f);
    em_model_free(model);
    if (dumped) fclose(dumped);
    free(ids);
    free(nll);
    free(argmax);
    return code;
}
