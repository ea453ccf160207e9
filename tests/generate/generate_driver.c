/* `generate_driver MODEL N ID...`: N greedy tokens after the prompt ids through the cpu backend's
 * decoding entry points (forward_backend.h: one prefill, then steps), printed as one line of ids;
 * no EOS or stop strings, so the ids compare with Hugging Face's generate given no EOS.
 * test_generate_transformers.py drives it. */
#include <stdio.h>
#include <stdlib.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"

static int fail(em_status err) {
    fprintf(stderr, "generate_driver: %s\n", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: generate_driver MODEL N ID...\n");
        return 2;
    }
    int n = atoi(argv[2]), length = argc - 3;
    int32_t *prompt = malloc((size_t)length * sizeof *prompt);
    for (int i = 0; i < length; i++) prompt[i] = (int32_t)atoi(argv[3 + i]);
    em_model *m;
    em_status err = em_model_load(argv[1], &m);
    if (err) return fail(err);
    const em_forward_backend *be = &em_forward_backend_cpu;
    em_forward_groups alone = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 1}};
    em_forward_options options = {0};
    void *f = NULL, *d = NULL;
    err = be->create(m, &alone, 1, &options, &f);
    if (!err) err = be->decode_new(f, 1, length + n, &d);
    int slot = 0;
    int32_t next;
    const int32_t *ids = prompt;
    if (!err) err = be->prefill(d, &slot, &ids, &length, 1, &next, NULL);
    for (int i = 0; i < n && !err; i++) {
        printf(i ? " %d" : "%d", next);
        int32_t token = next;
        if (i + 1 < n) err = be->step(d, &slot, &token, 1, &next, NULL);
    }
    printf("\n");
    if (d) be->decode_free(d);
    if (f) be->free(f);
    em_model_free(m);
    free(prompt);
    return err ? fail(err) : 0;
}
