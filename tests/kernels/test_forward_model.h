/* The model and CPU forwards of the forward tests: the model given as the program's first
 * argument, else the shared stories260K.gguf (the test skipped without it), and the precision
 * its second names. */
#ifndef EVALMESH_TEST_FORWARD_MODEL_H
#define EVALMESH_TEST_FORWARD_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"
#include "test.h"

/* argv[1]'s model, else stories260K; exits 1 when it does not load. */
static inline em_model *test_forward_model(int argc, char **argv) {
    char path[4096];
    if (argc > 1)
        snprintf(path, sizeof path, "%s", argv[1]);
    else
        test_shared_file("models/stories260K.gguf", path, sizeof path);
    em_model *m;
    em_status err = em_model_load(path, &m);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        em_error_free(err);
        exit(1);
    }
    return m;
}

/* The precision argv[2] names ("ggml", "bf16"), else exact. */
static inline em_precision test_forward_precision(int argc, char **argv) {
    em_precision p = EM_PRECISION_EXACT;
    if (argc > 2) em_precision_parse(argv[2], &p);
    return p;
}

/* A CPU forward of m alone on `threads` threads in `precision`; exits 1 when it cannot be made. */
static inline em_llama_forward *test_forward_new(const em_model *m, int threads,
                                                 em_precision precision) {
    em_llama_forward *f = NULL;
    em_status err = em_llama_forward_new(m, threads, &f);
    if (!err) err = em_llama_forward_set_precision(f, precision);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        exit(1);
    }
    return f;
}

#endif
