/* The `cpu` forward backend: the kernels of the Llama composition (stages/kernels/llama_block.h:
 * embedding (scaled), per layer RMSNorm, Q/K/V projections (+ optional biases, per-head q/k
 * norms), RoPE (the sliding layers' own table when the model has one), causal grouped-query
 * attention (scale, soft-cap and sliding window of the config), output projection (through the
 * post-norm), RMSNorm, SwiGLU or GeGLU MLP; the final norm and the vocabulary-tiled head with
 * optional soft-capped logits) on this rank's tensor-parallel shard of the weights (llama_shard.h).
 *
 * Windows run alone or in batches (their positions as the rows of one set of activations,
 * segments.h). Every kernel but attention works row by row, and each of a row's values is one
 * computation whatever the other rows: the packed GEMM of gemm.h gives a row the same fma chain
 * at any offset and any number of rows (its results do not even depend on the CPU's instruction
 * set); attention runs inside each window with the window's own blocks (attention.h); the head
 * runs per window. So a window's per-token results are bit-identical wherever, in whatever batch
 * and with however many threads it runs. Parallelism is over tiles, heads and rows with
 * OpenMP. */
#ifndef EVALMESH_KERNELS_LLAMA_FORWARD_H
#define EVALMESH_KERNELS_LLAMA_FORWARD_H

#include <stdint.h>

#include "util/error.h"
#include "stages/kernels/llama_shard.h"
#include "stages/kernels/cpu/scratch.h"
#include "stages/kernels/forward_backend.h"
#include "stages/kernels/linear_inputs.h"
#include "stages/model/loaded_model.h"

typedef struct em_llama_forward em_llama_forward;

/* The row of the forward-backend table (forward_backend.h). */
extern const em_forward_backend em_forward_backend_cpu;

/* Checks that the model's tensors have the shapes and types the forward needs and that they split
 * over the groups (exit status 2 naming the tensor or the numbers otherwise) and prepares a
 * forward with `threads` OpenMP threads holding this rank's shard. */
em_status em_llama_forward_new_split(const em_model *model, const em_forward_groups *groups,
                                     int threads, em_llama_forward **out);
/* The same for a rank alone (tp = 1). */
em_status em_llama_forward_new(const em_model *model, int threads, em_llama_forward **out);

/* Runs a batch of windows (forward_backend.h): for each, positions score_from..T-1 are scored and
 * nll, argmax are (T - score_from): -log p(target[t] | input[0..t]) and the most likely token,
 * the bits the window gets alone. A token id outside the vocabulary is an error (exit status 2)
 * naming its window and position. */
em_status em_llama_forward_batch(em_llama_forward *f, const em_batch_window *windows, int count);

/* Scores `count` shared prefixes and their continuations (forward_backend.h's
 * score_shared_prefixes): the prefixes run through the layers as one batch, each layer's keys and
 * values (after RoPE) kept; then every prefix's continuations run as one batch after them
 * (em_llama_forward_with_kept). Every other kernel works row by row as for windows, so each
 * continuation's nll and argmax are the bits of its whole window through em_llama_forward_batch.
 * cp > 1 is refused (exit status 2). */
em_status em_llama_forward_shared_prefixes(em_llama_forward *f, const em_shared_prefix *prefixes,
                                           int count);

/* Keys and values kept across calls for the windows of a batch (this rank's KV heads, after
 * RoPE): window w's rows of layer l start at k[w] + l * layer_stride (and v[w] likewise), KV heads
 * x head_dim floats (em_llama_forward_kv_width) a row. Window w's positions follow its first
 * before[w] kept rows (RoPE from before[w] on) and attend to them and then to their own; with
 * keep, the window's own rows are also written after them (rows before[w] onward), so a later
 * call can attend to them. */
typedef struct em_kept_keys {
    float *const *k, *const *v; /* (windows) */
    const int32_t *before;      /* (windows) */
    size_t layer_stride;        /* floats from one layer's rows to the next's */
    bool keep;
} em_kept_keys;

/* em_llama_forward_batch of windows that follow kept rows (a shared prefix's continuations, a
 * decoded sequence's next token): attention through em_attention_queries against each window's
 * kept rows and then its own, every other kernel row by row, so each window's nll and argmax are
 * the bits of its whole sequence (kept rows then its own) through em_llama_forward_batch, whatever
 * else shares its batch. x keeps every row's last residual for em_llama_forward_logits. cp > 1 is
 * refused (exit status 2). */
em_status em_llama_forward_with_kept(em_llama_forward *f, const em_kept_keys *kept,
                                     const em_batch_window *windows, int count);

/* The model's configuration. */
const em_llama_config *em_llama_forward_config(const em_llama_forward *f);

/* NULL with cp = 1, else an error (exit status 2): "a forward with cp = N does not WHAT", for
 * what runs only on whole sequences (kept keys and values). */
em_status em_llama_forward_refuse_cp(const em_llama_forward *f, const char *what);

/* The floats of one kept row: this rank's KV heads x head_dim. */
int em_llama_forward_kv_width(const em_llama_forward *f);

/* The logits (n_vocab, gathered over tp; every rank of the tp group calls it) of row `row` of the
 * batch run last: its final norm, the head's product and soft-cap, the numbers whose merge gives
 * that row's argmax. */
em_status em_llama_forward_logits(em_llama_forward *f, int row, float *logits);

/* One window: em_llama_forward_batch of a batch of one. */
em_status em_llama_forward_window(em_llama_forward *f, const int32_t *input, const int32_t *target,
                                  int T, int score_from, double *nll, int32_t *argmax);

/* Floating-point operations of one window: 2 per multiply-add of every matmul (projections,
 * MLP, output head on the scored positions) and of attention (causal: key j <= query i only). */
double em_llama_forward_flops(const em_llama_config *c, int T, int score_from);

/* Bytes of activations and scratch the forward holds for its largest batch so far, plus what
 * the output head allocates while it runs: the memory a batch needs besides the model. */
size_t em_llama_forward_memory(const em_llama_forward *f);

/* Bytes of the block and head weights this rank reads (its shard). */
size_t em_llama_forward_weight_bytes(const em_llama_forward *f);

/* Sets (or with NULL, clears) the observer of the linear layers' inputs (linear_inputs.h), for
 * windows computed from now on. */
void em_llama_forward_observe(em_llama_forward *f, const em_linear_observer *observer);

/* Sets how the products are rounded (forward_backend.h) for windows computed from now on: ggml
 * chooses its dot-product kernel (an error, exit status 2, when EVALMESH_CPU_KERNEL names a wrong
 * one). */
em_status em_llama_forward_set_precision(em_llama_forward *f, em_precision precision);

/* The GEMM microkernel in use: "avx512", "avx2" or "c" (see gemm_microkernel.h). */
const char *em_llama_forward_kernel(const em_llama_forward *f);
/* The ggml precision's dot-product kernel ("avx2" or "c", ggml_dot.h), NULL in the exact one. */
const char *em_llama_forward_ggml_kernel(const em_llama_forward *f);
/* The `bf16` precision's kernel (bf16_dot.h), or NULL in the other precisions. */
const char *em_llama_forward_bf16_kernel(const em_llama_forward *f);

void em_llama_forward_free(em_llama_forward *f);

#endif
