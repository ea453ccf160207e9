/* Block-by-block causal attention with an online softmax for context parallelism (see
 * attention_block.cuh). One warp per (query, head); per stretch of 32 keys of the block, the
 * lanes first mark which keys the query sees (a warp ballot, so a stretch nobody sees costs one
 * load of positions), then the stretch joins the state (attention_stretch.cuh). Every reduction
 * has a fixed order: results depend only on the blocks and their order. */
#include "stages/kernels/cuda/attention_block.cuh"

#include <math.h>

#include "stages/kernels/cuda/attention_stretch.cuh"

#define WARPS 4 /* warps per thread block, one (query, head) each */

static __global__ void attention_block_kernel(const float *q, const int32_t *qpos, int T,
                                              const float *k, const float *v, const int32_t *kpos,
                                              int nk, int H, int KV, int hd, em_cuda_mask mask,
                                              float *state, bool first) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int64_t item = (int64_t)blockIdx.x * WARPS + warp; /* t H + h, the state's row */
    if (item >= (int64_t)T * H) return;                /* whole warps leave together */
    int t = (int)(item / H), h = (int)(item % H), kvh = h / (H / KV);
    int QD = H * hd, KVD = KV * hd;
    float *st = state + (size_t)item * (size_t)(hd + 2);
    float qr[EM_CUDA_ATTENTION_PER_LANE], acc[EM_CUDA_ATTENTION_PER_LANE];
    float m = first ? -INFINITY : st[0], l = first ? 0.0f : st[1];
    for (int i = 0; i < EM_CUDA_ATTENTION_PER_LANE; i++) {
        int d = lane + 32 * i;
        qr[i] = d < hd ? q[(size_t)t * QD + (size_t)h * hd + d] : 0.0f;
        acc[i] = d < hd && !first ? st[2 + d] : 0.0f;
    }
    int32_t p = qpos[t];
    for (int j0 = 0; j0 < nk; j0 += 32) {
        int j = j0 + lane;
        bool valid = false;
        if (j < nk) {
            int32_t kp = kpos[j];
            valid = kp <= p && (mask.window <= 0 || p - kp < mask.window);
        }
        unsigned seen = __ballot_sync(EM_CUDA_FULL_MASK, valid); /* the same on every lane */
        if (!seen) continue;
        em_attention_stretch(qr, k, v, (size_t)KVD, (size_t)kvh * hd, j0, seen, valid, lane, hd,
                             mask, m, l, acc);
    }
    if (lane == 0) {
        st[0] = m;
        st[1] = l;
    }
    for (int i = 0; i < EM_CUDA_ATTENTION_PER_LANE; i++) {
        int d = lane + 32 * i;
        if (d < hd) st[2 + d] = acc[i];
    }
}

void em_cuda_attention_block(const float *q, const int32_t *qpos, int T, const float *k,
                             const float *v, const int32_t *kpos, int nk, int H, int KV, int hd,
                             const em_cuda_mask *mask, float *state, bool first) {
    int64_t items = (int64_t)T * H;
    if (items == 0) return;
    unsigned blocks = (unsigned)((items + WARPS - 1) / WARPS);
    attention_block_kernel<<<blocks, WARPS * 32>>>(q, qpos, T, k, v, kpos, nk, H, KV, hd, *mask,
                                                   state, first);
}

/* One thread per output value: element i of att is (item i / hd, dim i % hd). */
static __global__ void attention_finish_kernel(const float *state, int64_t n, int hd, float *att) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float *st = state + (size_t)(i / hd) * (size_t)(hd + 2);
    att[i] = st[2 + i % hd] / st[1];
}

void em_cuda_attention_finish(const float *state, int T, int H, int hd, float *att) {
    int64_t n = (int64_t)T * H * hd;
    if (n == 0) return;
    attention_finish_kernel<<<(unsigned)((n + 255) / 256), 256>>>(state, n, hd, att);
}
