/* The cuda forward's key-value cache for greedy decoding (see decode_cache.cuh). */
#include "stages/kernels/cuda/decode_cache.cuh"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/device_memory.cuh"

struct em_cuda_kv_cache {
    int layers, kv_width, sequences, positions;
    int32_t *length;        /* (sequences) rows held; 0: not filled */
    float **k, **v;         /* (sequences) each slot's device rows, NULL until filled */
    float **k_dev, **v_dev; /* device copies of k and v */
    bool stale;             /* k, v changed since their device copies */
    /* the batch in flight: its windows' slots and rows held before them, host and device */
    int32_t *before, *slot, *before_dev, *slot_dev;
    int batch_capacity;
    size_t bytes; /* of the slots allocated */
};

em_status em_cuda_kv_cache_new(int layers, int kv_width, int sequences, int positions,
                               em_cuda_kv_cache **out) {
    *out = NULL;
    em_cuda_kv_cache *c = (em_cuda_kv_cache *)em_xcalloc(1, sizeof *c);
    c->layers = layers;
    c->kv_width = kv_width;
    c->sequences = sequences;
    c->positions = positions;
    c->length = (int32_t *)em_xcalloc((size_t)sequences, sizeof *c->length);
    c->k = (float **)em_xcalloc((size_t)sequences, sizeof *c->k);
    c->v = (float **)em_xcalloc((size_t)sequences, sizeof *c->v);
    size_t table = (size_t)sequences * sizeof(float *);
    em_status err = em_cuda_alloc((void **)&c->k_dev, table, NULL);
    if (!err) err = em_cuda_alloc((void **)&c->v_dev, table, NULL);
    c->stale = true;
    if (err) {
        em_cuda_kv_cache_free(c);
        return em_error_prefix(err, "the key-value cache's table of %d sequences", sequences);
    }
    *out = c;
    return NULL;
}

const int32_t *em_cuda_kv_cache_lengths(const em_cuda_kv_cache *c) {
    return c->length;
}

size_t em_cuda_kv_cache_layer_floats(const em_cuda_kv_cache *c) {
    return (size_t)c->positions * (size_t)c->kv_width;
}

em_status em_cuda_kv_cache_reset(em_cuda_kv_cache *c, const int *slots, int count) {
    size_t floats = (size_t)c->layers * em_cuda_kv_cache_layer_floats(c);
    for (int i = 0; i < count; i++) {
        int s = slots[i];
        c->length[s] = 0;
        if (c->k[s]) continue;
        em_status err = em_cuda_alloc((void **)&c->k[s], 2 * floats * sizeof(float), NULL);
        if (err)
            return em_error_prefix(err, "the key-value cache of a sequence (%zu bytes)",
                                   2 * floats * sizeof(float));
        c->v[s] = c->k[s] + floats;
        c->bytes += 2 * floats * sizeof(float);
        c->stale = true;
    }
    return NULL;
}

em_status em_cuda_kv_cache_batch(em_cuda_kv_cache *c, const int *slots, int count,
                                 em_cuda_kept *kept, const int32_t **before, const int32_t **slot) {
    size_t table = (size_t)c->sequences * sizeof(float *);
    cudaError_t e = cudaSuccess;
    if (c->stale) {
        e = cudaMemcpy(c->k_dev, c->k, table, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(c->v_dev, c->v, table, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return em_cuda_error(e, "uploading the key-value cache's table");
        c->stale = false;
    }
    if (count > c->batch_capacity) {
        cudaFree(c->before_dev);
        cudaFree(c->slot_dev);
        c->before_dev = c->slot_dev = NULL;
        c->batch_capacity = 0;
        em_status err = em_cuda_alloc((void **)&c->before_dev, (size_t)count * 4, NULL);
        if (!err) err = em_cuda_alloc((void **)&c->slot_dev, (size_t)count * 4, NULL);
        if (err) return em_error_prefix(err, "the decoding batch's slots");
        c->before = (int32_t *)em_xrealloc(c->before, (size_t)count * sizeof *c->before);
        c->slot = (int32_t *)em_xrealloc(c->slot, (size_t)count * sizeof *c->slot);
        c->batch_capacity = count;
    }
    for (int i = 0; i < count; i++) {
        c->slot[i] = slots[i];
        c->before[i] = c->length[slots[i]];
    }
    e = cudaMemcpy(c->before_dev, c->before, (size_t)count * 4, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(c->slot_dev, c->slot, (size_t)count * 4, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return em_cuda_error(e, "uploading the decoding batch's slots");
    *kept = em_cuda_kept{c->k_dev, c->v_dev, 0, c->slot_dev, c->before_dev};
    *before = c->before;
    *slot = c->slot;
    return NULL;
}

void em_cuda_kv_cache_advance(em_cuda_kv_cache *c, const em_batch_window *windows, int count) {
    for (int i = 0; i < count; i++) c->length[c->slot[i]] += windows[i].T;
}

em_status em_cuda_kv_cache_copy(em_cuda_kv_cache *c, int from, int to, int rows) {
    em_status err = em_cuda_kv_cache_reset(c, &to, 1);
    if (err) return err;
    /* keys then values: 2 x layers runs of `rows` rows, one per layer's block of positions rows */
    size_t pitch = em_cuda_kv_cache_layer_floats(c) * sizeof(float);
    size_t width = (size_t)rows * (size_t)c->kv_width * sizeof(float);
    cudaError_t e = cudaMemcpy2D(c->k[to], pitch, c->k[from], pitch, width, 2 * (size_t)c->layers,
                                 cudaMemcpyDeviceToDevice);
    if (e != cudaSuccess) return em_cuda_error(e, "copying a shared prefix's keys and values");
    c->length[to] = rows;
    return NULL;
}

size_t em_cuda_kv_cache_bytes(const em_cuda_kv_cache *c) {
    return c->bytes;
}

void em_cuda_kv_cache_free(em_cuda_kv_cache *c) {
    if (!c) return;
    for (int s = 0; s < c->sequences; s++) cudaFree(c->k[s]); /* v[s] lies in the same block */
    free(c->k);
    free(c->v);
    free(c->length);
    cudaFree(c->k_dev);
    cudaFree(c->v_dev);
    cudaFree(c->before_dev);
    cudaFree(c->slot_dev);
    free(c->before);
    free(c->slot);
    free(c);
}
