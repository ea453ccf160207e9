/* Greedy decoding on the cpu backend: a key-value cache of a bounded number of sequences, each of
 * at most max_positions positions, filled by prefill (a prompt's every position) and grown by
 * step (one token for each of many sequences at once, of different lengths). Both run through
 * em_llama_forward_with_kept, so a sequence's logits at each position are the bits of its whole
 * window through em_llama_forward_batch, whatever else shares the batch and with any number of
 * threads: row-by-row kernels, and attention of a row against its kept rows then its own
 * (em_attention_queries). The argmax is the head's: the first (lowest) id among equal logits.
 *
 * Memory: a sequence's cache is n_layers x 2 x kv_width x max_positions x 4 bytes (kv_width: this
 * rank's KV heads x head_dim, em_llama_forward_kv_width), allocated at its first prefill; plus
 * the forward's activations for the largest prefill. tp > 1 keeps each rank's KV heads (the
 * forward's allgathers as for windows); cp > 1 is refused (exit status 2). */
#ifndef EVALMESH_KERNELS_CPU_DECODE_H
#define EVALMESH_KERNELS_CPU_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/kernels/cpu/llama_forward.h"

typedef struct em_cpu_decode em_cpu_decode;

/* A cache of `sequences` slots of at most `positions` positions each over forward f (which must
 * outlive it); sequences or positions < 1 and cp > 1 are errors (exit status 2). */
em_status em_cpu_decode_new(em_llama_forward *f, int sequences, int positions, em_cpu_decode **out);

/* Fills slots[i] (distinct, 0 <= slot < sequences; a slot filled before starts over) with the
 * keys and values of prompts[i] (lengths[i] ids, 1 .. positions) for i < count, in one batch;
 * next[i] is the argmax after the prompt's last position and, when logits is not NULL,
 * logits + i * n_vocab its logits. */
em_status em_cpu_decode_prefill(em_cpu_decode *d, const int *slots, const int32_t *const *prompts,
                                const int *lengths, int count, int32_t *next, float *logits);

/* Appends tokens[i] to slots[i] (distinct, filled, shorter than positions) for i < count, in one
 * batch, and gives each one's next argmax and, when logits is not NULL, its logits (count,
 * n_vocab). */
em_status em_cpu_decode_step(em_cpu_decode *d, const int *slots, const int32_t *tokens, int count,
                             int32_t *next, float *logits);

/* Bytes of the caches allocated so far. */
size_t em_cpu_decode_memory(const em_cpu_decode *d);

void em_cpu_decode_free(em_cpu_decode *d);

#endif
