/* One tensor-parallel rank's share of a Llama model's weights (Megatron-style):
 *   Wq, Wk, Wv    column-parallel by heads: rows of heads [r H/tp, (r+1) H/tp) and of KV heads
 *                 [r KV/tp, (r+1) KV/tp), views into the mapped file (their rows are contiguous);
 *   Wgate, Wup    column-parallel: rows [r F/tp, (r+1) F/tp), views;
 *   Wo, Wdown     row-parallel: the same columns of every row, copied once into owned memory
 *                 (a column slice is not contiguous in the file);
 *   biases        the slices of this rank's heads, as floats;
 *   output head   whole vocabulary tiles (em_vocab_shard), read in place from the full tensor;
 *   norms, token embedding  whole (the embedding is read by row, for the window's tokens only).
 * The mapped file's other rows are never touched, so the resident weights per rank fall as 1/tp.
 * A split that does not fit (heads, KV heads or the MLP width not divisible by tp, a column slice
 * that cuts a quantization block) is refused with the numbers, exit status 2. With tp = 1 every
 * view is the whole tensor.
 * Both forward backends take their share from here: the cpu forward reads it in place, the cuda
 * forward uploads it (and only it) to its GPU, so the two split a model identically. */
#ifndef EVALMESH_KERNELS_LLAMA_SHARD_H
#define EVALMESH_KERNELS_LLAMA_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/model/loaded_model.h"

typedef struct em_llama_shard_layer {
    em_tensor wq, wk, wv, wo, w_gate, w_up, w_down; /* this rank's parts (shapes as em_tensor) */
    float *bq, *bk, *bv;                            /* this rank's bias slices or NULL */
} em_llama_shard_layer;

typedef struct em_llama_shard {
    int tp, rank;
    int n_heads, n_kv_heads, ffn_dim; /* this rank's */
    int64_t vocab_row0, vocab_rows;   /* this rank's output-head rows */
    em_tensor output;                 /* those rows of the output head (a view) */
    em_llama_shard_layer *layers;     /* (n_layers) */
    size_t weight_bytes; /* the block and head weights this rank reads: falls as 1/tp */
} em_llama_shard;

/* The share of rank `rank` of `tp` (model already checked for shapes and types). */
em_status em_llama_shard_new(const em_model *model, int tp, int rank, em_llama_shard *out);
void em_llama_shard_free(em_llama_shard *shard, int n_layers);

#endif
