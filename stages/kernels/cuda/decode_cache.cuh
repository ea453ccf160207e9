/* The cuda forward's key-value cache for greedy decoding (forward_backend.h's decode_new,
 * prefill and step): `sequences` slots, each holding up to `positions` rows of every layer's keys
 * and values after RoPE (kv_width floats a row: this rank's KV heads x head_dim), in device memory
 * allocated at the slot's first prefill: 2 x layers x positions x kv_width floats, the keys of
 * all layers and then the values. A batch that continues slots gets them as an em_cuda_kept view
 * (kernels.cuh): the attention kernels write each window's own rows after its slot's and read its
 * keys from there, so a decoding step attends to exactly the rows a full forward of the sequence
 * computes. The cache only stores; the forward decides what runs (forward.cu). */
#ifndef EVALMESH_KERNELS_CUDA_DECODE_CACHE_CUH
#define EVALMESH_KERNELS_CUDA_DECODE_CACHE_CUH

#include <stddef.h>
#include <stdint.h>

#include "stages/kernels/cuda/kernels.cuh"
extern "C" {
#include "util/error.h"
#include "stages/kernels/forward_backend.h"
}

typedef struct em_cuda_kv_cache em_cuda_kv_cache;

/* A cache of `sequences` empty slots (none allocated yet), or an error (exit status 1) when the
 * device refuses its small tables. */
em_status em_cuda_kv_cache_new(int layers, int kv_width, int sequences, int positions,
                               em_cuda_kv_cache **out);

/* Rows each slot holds now (sequences values; 0: never filled). */
const int32_t *em_cuda_kv_cache_lengths(const em_cuda_kv_cache *c);

/* Empties slots (count, distinct, checked by the caller), allocating each on its first use; a
 * device that has no room is an error (exit status 1) naming the bytes. */
em_status em_cuda_kv_cache_reset(em_cuda_kv_cache *c, const int *slots, int count);

/* The view of a batch whose window i continues slots[i] after the rows it holds: kept (layer 0;
 * the caller moves layer_offset by em_cuda_kv_cache_layer_floats per layer) with its before and
 * slot arrays on the device, and the same arrays on the host in *before and *slot, valid until
 * the next call. */
em_status em_cuda_kv_cache_batch(em_cuda_kv_cache *c, const int *slots, int count,
                                 em_cuda_kept *kept, const int32_t **before, const int32_t **slot);

/* Floats from a slot's rows of one layer to the next layer's: positions x kv_width. */
size_t em_cuda_kv_cache_layer_floats(const em_cuda_kv_cache *c);

/* After the batch of the last em_cuda_kv_cache_batch has run: its window i's slot holds
 * windows[i].T more rows. */
void em_cuda_kv_cache_advance(em_cuda_kv_cache *c, const em_batch_window *windows, int count);

/* Slot `to` (allocated on its first use) holds a copy of the first `rows` rows of every layer of
 * slot `from` (filled with at least that many), and nothing after them: a shared prefix's keys and
 * values for another of its continuations. */
em_status em_cuda_kv_cache_copy(em_cuda_kv_cache *c, int from, int to, int rows);

/* Device bytes of the slots allocated so far. */
size_t em_cuda_kv_cache_bytes(const em_cuda_kv_cache *c);

void em_cuda_kv_cache_free(em_cuda_kv_cache *c);

#endif
