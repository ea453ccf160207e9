/* Causal attention of a block of queries against one block of keys at a time, for context
 * parallelism (ring attention): a rank holds the queries of its positions and sees the K/V
 * blocks of every rank of the cp ring in turn. Per query and head it keeps the online softmax
 * state (running max m, running sum l, unnormalized output acc); each block's scores (key
 * position <= query position only) are computed, their max merged into m (rescaling l and acc
 * by exp(m_old - m_new)), and exp(s - m) added into l and acc in key order. After the last block
 * out = acc / l. Every (query, head) is computed by one thread in a fixed order, so results
 * depend only on the blocks and their order, not on threads. Memory: the state, T x heads x
 * (head_dim + 2) floats, and one row of scores per thread. */
#ifndef EVALMESH_KERNELS_RING_ATTENTION_H
#define EVALMESH_KERNELS_RING_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/kernels/cpu/attention.h"

/* Floats of the state for T queries of n_heads heads. */
size_t em_ring_attention_state_floats(int T, int n_heads, int head_dim);

/* q (T, n_heads * head_dim) at positions qpos (T); k, v (nk, n_kv_heads * head_dim) at positions
 * kpos (nk). first starts the state afresh. Query head h reads KV head h / (n_heads / n_kv).
 * Scores are formed and masked as mask says (attention.h: scale, soft-cap, sliding window). */
void em_ring_attention_block(const float *q, const int32_t *qpos, int T, const float *k,
                             const float *v, const int32_t *kpos, int nk, int n_heads,
                             int n_kv_heads, int head_dim, const em_attention_mask *mask,
                             float *state, bool first, int threads);

/* out (T, n_heads * head_dim) = acc / l. */
void em_ring_attention_finish(const float *state, int T, int n_heads, int head_dim, float *out,
                              int threads);

#endif
