/* Test driver for the CPU forward: loads a model, runs one window and prints, per scored
 * position, "position nll argmax" (nll with 17 significant digits) so a NumPy reference can
 * check it. Usage: forward_driver MODEL THREADS SCORE_FROM ID0 ID1 ... IDN
 * (inputs are ID0..ID(N-1), targets ID1..IDN). Errors go to stderr with their exit status. */
#include <stdio.h>
#include <stdlib.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"

static int fail(em_status err) {
    fprintf(stderr, "error: %s\n", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s MODEL THREADS SCORE_FROM ID0 ID1 [ID...]\n", argv[0]);
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
    free(ids);
    free(nll);
    free(argmax);
    return code;
}
