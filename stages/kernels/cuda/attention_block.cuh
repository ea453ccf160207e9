/* Causal attention of a rank's queries against one block of keys at a time, for context
 * parallelism on the device (the composition's ring attention, llama_block.h; the CPU's is
 * ring_attention.h). Per query and head an online-softmax state (running max m, running sum l,
 * unnormalized output acc: hd + 2 floats, the CPU's layout) is carried from block to block in
 * ring order: a block's visible scores raise m (l and acc rescaled by exp(m_old - m_new)) and
 * add exp(s - m) to l and exp(s - m) v to acc, keys in block order; after the last block
 * att = acc / l. A key at position kp is visible to a query at p when kp <= p and, through a
 * sliding window W > 0, p - kp < W. */
#ifndef EVALMESH_KERNELS_CUDA_ATTENTION_BLOCK_CUH
#define EVALMESH_KERNELS_CUDA_ATTENTION_BLOCK_CUH

#include <stdint.h>

#include "stages/kernels/cuda/kernels.cuh"

/* q (T, H*hd) at positions qpos (T) against k, v (nk, KV*hd) at positions kpos (nk), query head
 * h reading KV head h / (H / KV), scores scaled, capped and windowed as mask says; state
 * (T, H, hd + 2) is started afresh when first; hd at most EM_CUDA_ATTENTION_MAX_HEAD_DIM. All
 * pointers are device memory. */
void em_cuda_attention_block(const float *q, const int32_t *qpos, int T, const float *k,
                             const float *v, const int32_t *kpos, int nk, int H, int KV, int hd,
                             const em_cuda_mask *mask, float *state, bool first);

/* att (T, H*hd) = acc / l of state (T, H, hd + 2). */
void em_cuda_attention_finish(const float *state, int T, int H, int hd, float *att);

#endif
