/* The score loop the two FP32 attention kernels share (kernels.cu's attention_kernel over whole
 * windows, attention_block.cu's over one block of keys at a time): one warp per (query, head),
 * its lanes holding dims lane, lane + 32, ... of q and of the unnormalized output acc. Per
 * stretch of 32 keys, each key the query sees gets its score as a warp sum (reads of a K row are
 * coalesced), kept by the lane of that key; the stretch's max joins the running max m (l and acc
 * rescaled by exp(m_old - m_new)), exp(s - m) joins l and the lanes add p_j v_j in key order.
 * Every reduction has a fixed order, so both kernels give the same bits for the same keys. */
#ifndef EVALMESH_KERNELS_CUDA_ATTENTION_STRETCH_CUH
#define EVALMESH_KERNELS_CUDA_ATTENTION_STRETCH_CUH

#include <math.h>
#include <stddef.h>

#include "stages/kernels/cuda/kernels.cuh"

#define EM_CUDA_FULL_MASK 0xffffffffu
/* Dims per lane of q and acc (lane, lane + 32, ...) at EM_CUDA_ATTENTION_MAX_HEAD_DIM. */
#define EM_CUDA_ATTENTION_PER_LANE (EM_CUDA_ATTENTION_MAX_HEAD_DIM / 32)

/* The xor butterflies leave every lane with the same bits (each step adds a pair both ways). */
static __device__ __forceinline__ float em_warp_max(float v) {
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(EM_CUDA_FULL_MASK, v, o));
    return v;
}

static __device__ __forceinline__ float em_warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(EM_CUDA_FULL_MASK, v, o);
    return v;
}

/* Keys j0 .. j0 + 31 of k and v (rows of row_floats floats, this query's KV head head_offset
 * floats in): `valid` on the lanes whose key the query sees, `seen` their ballot (the same on
 * every lane). qr holds this lane's dims of q; m, l and acc are the running softmax state. */
static __device__ __forceinline__ void em_attention_stretch(const float *qr, const float *k,
                                                            const float *v, size_t row_floats,
                                                            size_t head_offset, int j0,
                                                            unsigned seen, bool valid, int lane,
                                                            int hd, const em_cuda_mask &mask,
                                                            float &m, float &l, float *acc) {
    float s = -INFINITY; /* lane jj: the score of key j0 + jj */
    for (unsigned bits = seen; bits; bits &= bits - 1) {
        int jj = __ffs((int)bits) - 1;
        const float *kr = k + (size_t)(j0 + jj) * row_floats + head_offset;
        float part = 0.0f;
        for (int i = 0; i < EM_CUDA_ATTENTION_PER_LANE; i++) {
            int d = lane + 32 * i;
            if (d < hd) part += qr[i] * kr[d];
        }
        float dot = em_warp_sum(part);
        if (lane == jj) {
            s = dot * mask.scale;
            if (mask.softcap > 0.0f) s = mask.softcap * tanhf(s / mask.softcap);
        }
    }
    float m_new = fmaxf(m, em_warp_max(valid ? s : -INFINITY));
    float p = valid ? expf(s - m_new) : 0.0f;
    float corr = expf(m - m_new); /* 0 while nothing was seen (m = -inf) */
    l = l * corr + em_warp_sum(p);
    for (int i = 0; i < EM_CUDA_ATTENTION_PER_LANE; i++) acc[i] *= corr;
    for (unsigned bits = seen; bits; bits &= bits - 1) {
        int jj = __ffs((int)bits) - 1;
        float pj = __shfl_sync(EM_CUDA_FULL_MASK, p, jj);
        const float *vr = v + (size_t)(j0 + jj) * row_floats + head_offset;
        for (int i = 0; i < EM_CUDA_ATTENTION_PER_LANE; i++) {
            int d = lane + 32 * i;
            if (d < hd) acc[i] += pj * vr[d];
        }
    }
    m = m_new;
}

#endif
