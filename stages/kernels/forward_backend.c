/* The table of forward backends (see forward_backend.h): one row per backend. */
#include "stages/kernels/forward_backend.h"

#include <stdio.h>
#include <string.h>

#include "stages/kernels/cpu/llama_forward.h"
#if EVALMESH_HAVE_CUDA_FORWARD
#include "stages/kernels/cuda/cuda_forward.h"
#else
/* A build without the CUDA toolkit still knows the name and what the backend is, so a recipe
 * asking for it is told why it cannot run (at validation: the stages call `available` before
 * anything else), and `evalmesh gpus` that it needs a GPU. */
static em_status cuda_not_built(void) {
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "this evalmesh was built without the CUDA toolkit (configure with "
                        "/usr/local/cuda present and EVALMESH_CUDA=ON)");
}
static const em_forward_backend em_forward_backend_cuda = {
    .name = "cuda",
    .weight_storage = true,
    .needs_gpu = true,
    .available = cuda_not_built,
};
#endif

static const em_forward_backend *const rows[] = {
    &em_forward_backend_cpu,
    &em_forward_backend_cuda,
};

const em_forward_backend *em_forward_backend_find(const char *name) {
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        if (strcmp(rows[i]->name, name) == 0) return rows[i];
    return NULL;
}

static const char *const precision_names[] = {"exact", "ggml", "bf16"}; /* by em_precision */

const char *em_precision_name(em_precision precision) {
    return precision_names[precision];
}

bool em_precision_parse(const char *name, em_precision *out) {
    for (size_t i = 0; i < sizeof precision_names / sizeof *precision_names; i++) {
        if (strcmp(name, precision_names[i]) == 0) {
            *out = (em_precision)i;
            return true;
        }
    }
    return false;
}

const char *em_forward_backend_names_where(bool (*keep)(const em_forward_backend *be), char *buf,
                                           size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof rows / sizeof *rows && used < size; i++)
        if (!keep || keep(rows[i]))
            used +=
                (size_t)snprintf(buf + used, size - used, "%s%s", used ? " " : "", rows[i]->name);
    return buf;
}

const char *em_forward_backend_names(void) {
    static _Thread_local char names[256]; /* per thread: built on first use */
    if (!names[0]) em_forward_backend_names_where(NULL, names, sizeof names);
    return names;
}

static bool decodes(const em_forward_backend *be) {
    return be->decode_new != NULL;
}

em_status em_forward_decoding(const em_forward_backend *be) {
    if (decodes(be)) return NULL;
    char names[256];
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "the %s forward backend does not decode (greedy generation runs on: %s)",
                        be->name, em_forward_backend_names_where(decodes, names, sizeof names));
}

em_status em_forward_score_window(const em_forward_backend *be, void *f, const int32_t *input,
                                  const int32_t *target, int T, int score_from, double *nll,
                                  int32_t *argmax) {
    em_batch_window one = {input, target, T, score_from, nll, argmax};
    return be->score_batch(f, &one, 1);
}

em_status em_forward_ring_step(const em_forward_group *g, const void *send, void *recv,
                               size_t bytes) {
    if (g->size == 1) {
        if (send != recv) memmove(recv, send, bytes);
        return NULL;
    }
    return g->sendrecv(g->comm, send, (g->rank + 1) % g->size, recv,
                       (g->rank + g->size - 1) % g->size, bytes);
}

em_status em_forward_allgather(const em_forward_group *g, const void *send, void *recv,
                               size_t bytes) {
    if (g->size == 1) {
        if (send != recv) memmove(recv, send, bytes);
        return NULL;
    }
    return g->allgather(g->comm, send, recv, bytes);
}
