/* The cpu backend's key-value cache and greedy decoding steps (see decode.h). */
#include "stages/kernels/cpu/decode.h"

#include <stdlib.h>
#include <string.h>

struct em_cpu_decode {
    em_llama_forward *f;
    const em_llama_config *config;
    int sequences, positions;
    int32_t *length;   /* (sequences) positions kept; 0: not filled */
    float **k, **v;    /* (sequences) each (layers, positions, kv_width), NULL until filled */
    size_t layer_rows; /* floats of one layer's rows: positions x kv_width */
    size_t bytes;      /* of the caches allocated */
};

em_status em_cpu_decode_new(em_llama_forward *f, int sequences, int positions,
                            em_cpu_decode **out) {
    *out = NULL;
    em_status err = em_decode_check_cache(sequences, positions);
    if (err) return err;
    if ((err = em_llama_forward_refuse_cp(f, "decode (decoding needs cp = 1)"))) return err;
    em_cpu_decode *d = em_xcalloc(1, sizeof *d);
    d->f = f;
    d->config = em_llama_forward_config(f);
    d->sequences = sequences;
    d->positions = positions;
    d->length = em_xcalloc((size_t)sequences, sizeof *d->length);
    d->k = em_xcalloc((size_t)sequences, sizeof *d->k);
    d->v = em_xcalloc((size_t)sequences, sizeof *d->v);
    d->layer_rows = (size_t)positions * (size_t)em_llama_forward_kv_width(f);
    *out = d;
    return NULL;
}

/* Runs windows (count, of T rows in all) after their slots' kept rows, keeping their own, and
 * gives each window's last row's logits when asked. */
static em_status run(em_cpu_decode *d, const int *slots, const em_batch_window *windows, int count,
                     float *logits) {
    float **k = em_xmalloc((size_t)count * sizeof *k), **v = em_xmalloc((size_t)count * sizeof *v);
    int32_t *before = em_xmalloc((size_t)count * sizeof *before);
    for (int i = 0; i < count; i++) {
        k[i] = d->k[slots[i]];
        v[i] = d->v[slots[i]];
        before[i] = d->length[slots[i]];
    }
    em_kept_keys kept = {k, v, before, d->layer_rows, true};
    em_status err = em_llama_forward_with_kept(d->f, &kept, windows, count);
    size_t vocab = (size_t)d->config->n_vocab;
    for (int i = 0, row = 0; i < count && !err; i++) {
        row += windows[i].T;
        if (logits) err = em_llama_forward_logits(d->f, row - 1, logits + (size_t)i * vocab);
    }
    for (int i = 0; i < count && !err; i++) d->length[slots[i]] += windows[i].T;
    free(k);
    free(v);
    free(before);
    return err;
}

em_status em_cpu_decode_prefill(em_cpu_decode *d, const int *slots, const int32_t *const *prompts,
                                const int *lengths, int count, int32_t *next, float *logits) {
    em_status err = em_decode_check_prefill(d->sequences, d->positions, slots, lengths, count);
    if (err) return err;
    size_t floats = (size_t)d->config->n_layers * d->layer_rows;
    for (int i = 0; i < count; i++) {
        int s = slots[i];
        if (!d->k[s]) {
            d->k[s] = malloc(floats * sizeof(float));
            d->v[s] = malloc(floats * sizeof(float));
            if (!d->k[s] || !d->v[s]) {
                free(d->k[s]);
                free(d->v[s]);
                d->k[s] = d->v[s] = NULL;
                return em_error_new(EM_EXIT_RUNTIME,
                                    "out of memory for the key-value cache of a sequence "
                                    "(%zu bytes)",
                                    2 * floats * sizeof(float));
            }
            d->bytes += 2 * floats * sizeof(float);
        }
        d->length[s] = 0;
    }
    double *nll = em_xmalloc((size_t)count * sizeof *nll);
    em_batch_window *windows = em_xcalloc((size_t)count, sizeof *windows);
    for (int i = 0; i < count; i++)
        windows[i] =
            (em_batch_window){prompts[i], NULL, lengths[i], lengths[i] - 1, nll + i, next + i};
    err = run(d, slots, windows, count, logits);
    free(nll);
    free(windows);
    return err ? em_error_prefix(err, "prefill") : NULL;
}

em_status em_cpu_decode_step(em_cpu_decode *d, const int *slots, const int32_t *tokens, int count,
                             int32_t *next, float *logits) {
    em_status err = em_decode_check_step(d->sequences, d->positions, d->length, slots, count);
    if (err) return err;
    double *nll = em_xmalloc((size_t)count * sizeof *nll);
    em_batch_window *windows = em_xcalloc((size_t)count, sizeof *windows);
    for (int i = 0; i < count; i++)
        windows[i] = (em_batch_window){tokens + i, NULL, 1, 0, nll + i, next + i};
    err = run(d, slots, windows, count, logits);
    free(nll);
    free(windows);
    return err ? em_error_prefix(err, "decoding step") : NULL;
}

size_t em_cpu_decode_memory(const em_cpu_decode *d) {
    return d->bytes;
}

void em_cpu_decode_free(em_cpu_decode *d) {
    if (!d) return;
    for (int s = 0; s < d->sequences; s++) {
        free(d->k[s]);
        free(d->v[s]);
    }
    free(d->k);
    free(d->v);
    free(d->length);
    free(d);
}
