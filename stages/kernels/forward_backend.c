/* The table of forward backends (see forward_backend.h): one row per backend. */
#include "stages/kernels/forward_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/kernels/vocab_head.h"
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

em_status em_decode_check_cache(int sequences, int positions) {
    if (sequences >= 1 && positions >= 1) return NULL;
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "a decoding cache of %d sequences of %d positions is empty", sequences,
                        positions);
}

em_status em_decode_check_slots(int sequences, const int *slots, int count, const char *what) {
    for (int i = 0; i < count; i++) {
        if (slots[i] < 0 || slots[i] >= sequences)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: sequence %d of the batch names slot %d of a cache of %d", what,
                                i, slots[i], sequences);
        for (int j = 0; j < i; j++)
            if (slots[j] == slots[i])
                return em_error_new(EM_EXIT_BAD_INPUT,
                                    "%s: sequences %d and %d of the batch name the same slot %d",
                                    what, j, i, slots[i]);
    }
    return NULL;
}

em_status em_decode_check_prefill(int sequences, int positions, const int *slots,
                                  const int *lengths, int count) {
    em_status err = em_decode_check_slots(sequences, slots, count, "prefill");
    for (int i = 0; i < count && !err; i++) {
        if (lengths[i] < 1 || lengths[i] > positions)
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "prefill: prompt %d of the batch has %d ids (1 to %d fit the cache)",
                               i, lengths[i], positions);
    }
    return err;
}

em_status em_decode_check_step(int sequences, int positions, const int32_t *length,
                               const int *slots, int count) {
    em_status err = em_decode_check_slots(sequences, slots, count, "decoding step");
    for (int i = 0; i < count && !err; i++) {
        int s = slots[i];
        if (length[s] < 1 || length[s] >= positions)
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "decoding step: sequence %d of the batch (slot %d) holds %d "
                               "positions (1 to %d - 1 can take one more)",
                               i, s, length[s], positions);
    }
    return err;
}

em_status em_forward_gather_vocab(const em_forward_group *tp, int64_t n_vocab, const float *mine,
                                  float *logits) {
    int64_t most = 0, row0, rows;
    for (int r = 0; r < tp->size; r++) {
        em_vocab_shard(n_vocab, tp->size, r, &row0, &rows);
        if (rows > most) most = rows;
    }
    if (tp->size == 1) {
        if (mine != logits) memmove(logits, mine, (size_t)n_vocab * sizeof *logits);
        return NULL;
    }
    /* every rank's rows, each rank's block padded to the most rows a rank has */
    float *all = em_xmalloc((size_t)tp->size * (size_t)(most + 1) * sizeof *all);
    em_status err = em_forward_allgather(tp, mine, all, (size_t)(most + 1) * sizeof *mine);
    for (int r = 0; r < tp->size && !err; r++) {
        em_vocab_shard(n_vocab, tp->size, r, &row0, &rows);
        memcpy(logits + row0, all + (size_t)r * (size_t)(most + 1), (size_t)rows * sizeof *logits);
    }
    free(all);
    return err ? em_error_prefix(err, "gathering the logits") : NULL;
}
