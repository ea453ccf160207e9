/* Block-by-block causal attention with an online softmax (see ring_attention.h). The loops are
 * laid out to vectorize without reassociating: scores run across keys (K transposed per block,
 * each score one multiply-add chain over head_dim in order), outputs across head_dim (each one
 * chain over keys in order); exponentials go through fast_exp.h. Keys arrive in increasing
 * positions, so a query sees a prefix of each block. */
#include "stages/kernels/cpu/ring_attention.h"

#include <math.h>
#include <stdlib.h>

#include "util/error.h"
#include "stages/kernels/cpu/fast_exp.h"
#include "stages/kernels/cpu/scratch.h"
#include "stages/kernels/cpu/softcap.h"

size_t em_ring_attention_state_floats(int T, int n_heads, int head_dim) {
    return (size_t)T * (size_t)n_heads * (size_t)(head_dim + 2);
}

/* Keys of kpos (increasing) at or before position p. */
static int visible(const int32_t *kpos, int nk, int32_t p) {
    int lo = 0, hi = nk;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (kpos[mid] <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void em_ring_attention_block(const float *q, const int32_t *qpos, int T, const float *k,
                             const float *v, const int32_t *kpos, int nk, int n_heads,
                             int n_kv_heads, int head_dim, const em_attention_mask *mask,
                             float *state, bool first, int threads) {
    int H = n_heads, KV = n_kv_heads, hd = head_dim, group = H / KV;
    bool parallel = (int64_t)T * H * nk * hd >= EM_PARALLEL_MIN_WORK;
    /* kt (KV, hd, nk): the block's keys transposed */
    float *kt = em_xmalloc((size_t)KV * hd * (size_t)(nk ? nk : 1) * sizeof *kt);
    for (int j = 0; j < nk; j++)
        for (int c = 0; c < KV * hd; c++) kt[(size_t)c * nk + j] = k[(size_t)j * KV * hd + c];
#pragma omp parallel num_threads(threads) if (parallel)
    {
        float *s = em_xmalloc((size_t)(nk > 0 ? nk : 1) * sizeof *s); /* this thread's scores */
#pragma omp for schedule(dynamic, 16)
        for (int64_t th = 0; th < (int64_t)T * H; th++) {
            int t = (int)(th / H), h = (int)(th % H), g = h / group;
            float *st = state + (size_t)th * (size_t)(hd + 2), *acc = st + 2;
            if (first) {
                st[0] = -INFINITY;
                st[1] = 0.0f;
                for (int d = 0; d < hd; d++) acc[d] = 0.0f;
            }
            /* the visible keys: lo .. end-1 (through a window, those after position p - W) */
            int end = visible(kpos, nk, qpos[t]);
            int lo = mask->window > 0 ? visible(kpos, nk, qpos[t] - mask->window) : 0;
            if (end <= lo) continue;
            int n = end - lo;
            const float *qt = q + ((size_t)t * H + h) * hd;
            const float *kg = kt + (size_t)g * hd * nk + lo;
            for (int j = 0; j < n; j++) s[j] = 0.0f;
            for (int d = 0; d < hd; d++) {
                float qd = qt[d];
                const float *kd = kg + (size_t)d * nk;
                for (int j = 0; j < n; j++) s[j] += qd * kd[j];
            }
            for (int j = 0; j < n; j++) s[j] *= mask->scale;
            if (mask->softcap > 0) em_softcap(s, (size_t)n, mask->softcap);
            float max = -INFINITY;
            for (int j = 0; j < n; j++) max = s[j] > max ? s[j] : max;
            if (max > st[0]) {
                float c = expf(st[0] - max); /* 0 for the first visible block */
                st[1] *= c;
                for (int d = 0; d < hd; d++) acc[d] *= c;
                st[0] = max;
            }
            for (int j = 0; j < n; j++) s[j] -= st[0];
            em_exp_inplace(s, (size_t)n);
            float sum = st[1];
            for (int j = 0; j < n; j++) {
                float p = s[j];
                sum += p;
                const float *vj = v + ((size_t)(lo + j) * KV + g) * hd;
                for (int d = 0; d < hd; d++) acc[d] += p * vj[d];
            }
            st[1] = sum;
        }
        free(s);
    }
    free(kt);
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
