/* Block-by-block causal attention with an online softmax (see ring_attention.h). */
#include "stages/kernels/cpu/ring_attention.h"

#include <math.h>
#include <stdlib.h>

#include "util/error.h"
#include "stages/kernels/cpu/scratch.h"

size_t em_ring_attention_state_floats(int T, int n_heads, int head_dim) {
    return (size_t)T * (size_t)n_heads * (size_t)(head_dim + 2);
}

void em_ring_attention_block(const float *q, const int32_t *qpos, int T, const float *k,
                             const float *v, const int32_t *kpos, int nk, int n_heads,
                             int n_kv_heads, int head_dim, float *state, bool first, int threads) {
    int H = n_heads, KV = n_kv_heads, hd = head_dim, group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
    bool parallel = (int64_t)T * H * nk * hd >= EM_PARALLEL_MIN_WORK;
#pragma omp parallel num_threads(threads) if (parallel)
    {
        float *s = em_xmalloc((size_t)(nk > 0 ? nk : 1) * sizeof *s); /* this thread's scores */
#pragma omp for schedule(static)
        for (int64_t th = 0; th < (int64_t)T * H; th++) {
            int t = (int)(th / H), h = (int)(th % H), g = h / group;
            float *st = state + (size_t)th * (size_t)(hd + 2), *acc = st + 2;
            if (first) {
                st[0] = -INFINITY;
                st[1] = 0.0f;
                for (int d = 0; d < hd; d++) acc[d] = 0.0f;
            }
            const float *qt = q + ((size_t)t * H + h) * hd;
            float max = -INFINITY;
            for (int j = 0; j < nk; j++) {
                if (kpos[j] > qpos[t]) {
                    s[j] = -INFINITY;
                    continue;
                }
                const float *kj = k + ((size_t)j * KV + g) * hd;
                float dot = 0.0f;
                for (int d = 0; d < hd; d++) dot = fmaf(qt[d], kj[d], dot);
                s[j] = dot * scale;
                if (s[j] > max) max = s[j];
            }
            if (max == -INFINITY) continue; /* no key of this block is visible */
            if (max > st[0]) {
                float c = expf(st[0] - max); /* 0 for the first visible block */
                st[1] *= c;
                for (int d = 0; d < hd; d++) acc[d] *= c;
                st[0] = max;
            }
            for (int j = 0; j < nk; j++) {
                if (s[j] == -INFINITY) continue;
                float p = expf(s[j] - st[0]);
                st[1] += p;
                const float *vj = v + ((size_t)j * KV + g) * hd;
                for (int d = 0; d < hd; d++) acc[d] = fmaf(p, vj[d], acc[d]);
            }
        }
        free(s);
    }
}

void em_ring_attention_finish(const float *state, int T, int n_heads, int head_dim, float *out,
                              int threads) {
    int64_t n = (int64_t)T * n_heads;
#pragma omp parallel for num_threads(threads) if (n * head_dim >= EM_PARALLEL_MIN_ELEMENTS)
    for (int64_t th = 0; th < n; th++) {
        const float *st = state + (size_t)th * (size_t)(head_dim + 2);
        for (int d = 0; d < head_dim; d++) out[(size_t)th * head_dim + d] = st[2 + d] / st[1];
    }
}
