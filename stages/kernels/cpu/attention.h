/* Causal grouped-query attention over one window.
 *
 * Queries are processed in blocks of EM_ATTN_QUERY_BLOCK positions. For a head h and a query
 * block [q0, q1) the scores S = Q K^T / sqrt(head_dim) for keys 0..q1-1 are one sgemm into
 * (q1 - q0, q1) floats of the thread's scratch, the causal mask and a row softmax follow, and
 * the output block is P V (one more sgemm). Query head h reads KV head h / (n_heads/n_kv_heads).
 * Memory is bounded by threads x EM_ATTN_QUERY_BLOCK x T floats, never (T, T) per head.
 * Block boundaries and sgemm shapes depend only on T, so results do not depend on threads. */
#ifndef EVALMESH_KERNELS_ATTENTION_H
#define EVALMESH_KERNELS_ATTENTION_H

#include <stddef.h>

#include "stages/kernels/cpu/scratch.h"

#define EM_ATTN_QUERY_BLOCK 64

/* Scratch floats per thread that em_attention needs for a window of T positions. */
size_t em_attention_scratch_floats(int T);

/* q is (T, n_heads * head_dim), k and v are (T, n_kv_heads * head_dim), out is
 * (T, n_heads * head_dim). */
void em_attention(const float *q, const float *k, const float *v, int T, int n_heads,
                  int n_kv_heads, int head_dim, float *out, em_scratch *s);

#endif
