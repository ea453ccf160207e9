/* The composition of a Llama-family forward over a batch of windows, written once for every
 * backend (one window is a batch of one):
 *   x (T, D) = embedding rows of the input, the windows' positions concatenated (T rows in all,
 *              segments.h), each window's positions restarting at 0
 *   per layer:  xn = RMSNorm(x) * attn_norm;  q, k, v = xn Wq^T, xn Wk^T, xn Wv^T (+ biases),
 *               RoPE on q and k;  att = causal grouped-query attention;  x += att Wo^T;
 *               xn = RMSNorm(x) * ffn_norm;  x += (silu(xn Wgate^T) * (xn Wup^T)) Wdown^T
 *   with the architecture's features (em_llama_config, architectures.h) inside the kernels:
 *   embedding scale, per-head q/k norms, GeGLU, soft-capped scores and logits, sliding windows;
 *   and here post_norms (Gemma 2, 3): x += RMSNorm(att Wo^T) * attn_post_norm and likewise for
 *   the MLP, the products formed whole (summed over tp) before their norm.
 *   head:       per window, xn = RMSNorm(its rows from score_from) * output_norm; per vocabulary
 *               tile the max, sum of exponentials and argmax (vocab_head.h), merged in tile order.
 * Attention never crosses a window and every other step works row by row, so a window's results
 * are those it gets alone as long as the backend's kernels give a row the same bits whatever
 * rows share its batch (the cpu backend's do; the cuda backend's GEMMs need fixed algorithms).
 * A backend gives the steps as kernels over buffers it owns (em_llama_kernels); this file decides
 * their order and what crosses the tensor-parallel group:
 *   tp > 1: each rank holds the heads, KV heads, MLP columns and vocabulary tiles of its shard;
 *   Wo and Wdown are row-parallel, so their products are partial sums (T, D) that every rank
 *   gathers and adds in rank order (the same bits on every rank); the head's tiles are gathered
 *   (T x tiles x 16 bytes, never the logits) and merged as for tp = 1, so the head adds no
 *   difference of its own.
 *   cp > 1: the window's positions are cut into 2 cp contiguous blocks and rank r of the cp group
 *   holds blocks r and 2 cp - 1 - r (zig-zag, so every rank has as many causal pairs as the
 *   others); everything but attention works on the rank's own positions; attention passes each
 *   rank's K/V block (with its positions) around the cp ring, cp - 1 steps, every rank merging
 *   the blocks into an online softmax in ring order (its own first); each rank scores its own
 *   positions and the ranks gather the (position, nll, argmax) of the scored ones, so every rank
 *   ends with the whole window's scores. Activations per rank fall as 1/cp. A window shorter
 *   than 2 cp positions (a document's last) is computed whole on every rank of the cp group.
 *   A batch with cp > 1 holds one window. */
#ifndef EVALMESH_KERNELS_LLAMA_BLOCK_H
#define EVALMESH_KERNELS_LLAMA_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/kernels/forward_backend.h"
#include "stages/kernels/segments.h"
#include "stages/kernels/vocab_head.h"

typedef struct em_llama_kernels {
    /* Makes room for the rows of windows (T = windows->start[windows->count]) and keeps the
     * windows for attention; x = embedding rows of input (T); the RoPE table of positions (T;
     * NULL: 0 .. T-1, one window). */
    em_status (*begin)(void *b, const int32_t *input, const int32_t *positions,
                       const em_segments *windows);
    /* xn = RMSNorm(x) * the layer's attention (ffn false) or MLP (ffn true) norm weight. */
    void (*norm)(void *b, int layer, bool ffn, int T);
    /* q, k, v of this rank's heads from xn, biases added, RoPE applied. */
    void (*qkv)(void *b, int layer, int T);
    /* att = causal attention of this rank's heads within each window of begin's (cp = 1). */
    void (*attention)(void *b, int layer, int T);
    /* cp > 1: this rank's k and v (T, kv_width) after RoPE; attention of q at positions qpos
     * against a block of nk keys at kpos (first: the first block), and att from the blocks. */
    void (*local_kv)(void *b, float **k, float **v, int *kv_width);
    void (*attention_block)(void *b, int layer, int T, const int32_t *qpos, const float *k,
                            const float *v, const int32_t *kpos, int nk, bool first);
    void (*attention_finish)(void *b, int T);
    /* x += att Wo^T; with partial, y = att Wo_shard^T instead (this rank's columns of Wo). */
    void (*attn_out)(void *b, int layer, int T, bool partial);
    /* x += swiglu(xn) Wdown^T from xn; with partial, y = this rank's share of it instead. */
    void (*mlp)(void *b, int layer, int T, bool partial);
    /* y (T, D), and x += all[0] + all[1] + ... + all[parts-1] (each (T, D)), in that order. */
    float *(*partial)(void *b);
    void (*add_partials)(void *b, const float *all, int parts, int T);
    /* post_norms: x += RMSNorm(all[0] + ... + all[parts-1]) * the layer's attention (ffn false)
     * or MLP post-norm weight; all NULL: of y. */
    void (*add_normed)(void *b, int layer, bool ffn, const float *all, int parts, int T);
    /* xn (n, D) = RMSNorm(x[from .. from+n)) * output_norm, then the tiles of this rank's
     * vocabulary rows (part (tiles, n)) and the logits of the targets that fall in them; target
     * NULL: the tiles' max and argmax alone (sum_exp may be left 0, target_logit untouched). */
    void (*head_tiles)(void *b, int from, int n, const int32_t *target, em_head_tile *part,
                       float *target_logit);
} em_llama_kernels;

/* The positions of cp rank r in a window of T (T >= 2 cp): blocks r and 2 cp - 1 - r; returns
 * their count (positions may be NULL to count only). */
int em_cp_positions(int T, int cp, int r, int32_t *positions);

/* Runs a batch of count windows through the kernels, each scored into its nll and argmax, the
 * same on every rank of the groups and the same as the window alone. n_vocab is the whole
 * vocabulary. The windows are checked first, for every backend alike: each has T >= 1 positions
 * scored from 0 <= score_from < T, its input and scored target ids lie in the vocabulary, and the
 * batch has at most INT32_MAX positions (else exit status 2 naming the window of the batch and
 * the position). cp > 1 takes one window (count > 1: exit status 2). A single window with nll
 * NULL (cp = 1 only): the layers without the head, x is left after the last block for the
 * caller's own head (a compared pair) or the kernels keep what they need of it (a shared
 * prefix's keys and values). */
em_status em_llama_compose(const em_llama_kernels *k, void *b, int n_layers, int dim,
                           bool post_norms, int64_t n_vocab, const em_forward_groups *groups,
                           int threads, const em_batch_window *windows, int count);

#endif
