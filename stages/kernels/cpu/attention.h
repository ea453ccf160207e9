/* Causal grouped-query attention over the windows of a batch (segments.h: each window attends
 * only to itself), optionally through a sliding window and with soft-capped scores
 * (em_attention_mask).
 *
 * Each window's queries are processed in blocks of EM_ATTN_QUERY_BLOCK positions counted from the
 * window's first. For a head h and a query block [q0, q1) of a window, the scores for its keys
 * 0..q1-1 come transposed from the packed GEMM (gemm.h):
 * S^T (q1, q1 - q0) = K Q^T, with K's rows read in place. The scale (1/sqrt(head_dim) for Llama),
 * the causal mask and the softmax's exponentials then run down each query's column, vectorized
 * across the block's queries (through the window when one is given: softmax_columns_window, key by
 * key); E = exp(S - max)^T is read in place as panels of queries for one more GEMM against V
 * transposed (once per call), and each output is divided by its query's sum as it is written
 * straight into the packed layout the output projection reads. Query head h reads KV head h /
 * (n_heads / n_kv_heads). Memory per thread is about EM_ATTN_QUERY_BLOCK x T floats, never (T, T)
 * per head. Every dot product is one fma chain (gemm_microkernel.h) over head_dim or over keys
 * 0..q1-1 (masked ones are exact zeros), so a window's results depend only on the window: not on
 * the other windows of its batch, its row offset, threads or the CPU.
 *
 * em_attention_queries computes only the last positions of each window as queries (a shared
 * prefix's continuations: the window's keys are the prefix's and then the continuation's own).
 * A query's numbers do not depend on which block it falls in: its scores are each one fma chain
 * over head_dim, the exponentials are element by element, its sum runs over its keys in order and
 * its output is one fma chain over keys 0..q1-1 whose keys past the query add exact zeros. So a
 * continuation's positions get the bits they get in the whole window. */
#ifndef EVALMESH_KERNELS_ATTENTION_H
#define EVALMESH_KERNELS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "stages/kernels/cpu/scratch.h"
#include "stages/kernels/segments.h"

#define EM_ATTN_QUERY_BLOCK 64

/* How scores are formed and masked: s = q.k * scale (Llama: 1/sqrt(head_dim)); with softcap > 0,
 * s = softcap * tanh(s / softcap); query i sees keys j <= i, and with window > 0 only those with
 * i - j < window. */
typedef struct em_attention_mask {
    float scale;
    float softcap;
    int window;
} em_attention_mask;

/* Scratch floats per thread that em_attention needs for windows of at most T positions. */
size_t em_attention_scratch_floats(int T, int head_dim);

/* Floats of the V^T buffer em_attention needs for T rows: (n_kv_heads * head_dim, T + padding). */
size_t em_attention_vt_floats(int T, int n_kv_heads, int head_dim);

/* q is (T, n_heads * head_dim), k and v are (T, n_kv_heads * head_dim) with T the windows' rows
 * (windows->start[windows->count]); out_packed is the output (T, n_heads * head_dim) packed
 * (em_gemm_packed_floats, the padding past T zeros); vt is em_attention_vt_floats(T) of working
 * memory; s holds em_attention_scratch_floats of the longest window per thread. */
void em_attention(const float *q, const float *k, const float *v, const em_segments *windows,
                  int n_heads, int n_kv_heads, int head_dim, const em_attention_mask *mask,
                  float *out_packed, float *vt, em_scratch *s);

/* em_attention for the last query_start[w+1] - query_start[w] positions of each window w only:
 * their queries are rows query_start[w] .. query_start[w+1]-1 of q and of out_packed (packed for
 * query_start[count] rows), while k[w] and v[w] hold every position of window w (its rows of
 * windows, each (n_w, n_kv_heads * head_dim), anywhere in memory: a decoded sequence's cache as
 * it is); vt is em_attention_vt_floats of the windows' rows. */
void em_attention_queries(const float *q, const int32_t *query_start, const float *const *k,
                          const float *const *v, const em_segments *windows, int n_heads,
                          int n_kv_heads, int head_dim, const em_attention_mask *mask,
                          float *out_packed, float *vt, em_scratch *s);

#endif
