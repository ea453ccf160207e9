/* Causal GQA attention in query blocks (see attention.h). */
#include "stages/kernels/cpu/attention.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>

#include "stages/kernels/cpu/fast_exp.h"

size_t em_attention_scratch_floats(int T) {
    return (size_t)EM_ATTN_QUERY_BLOCK * (size_t)T;
}

void em_attention(const float *q, const float *k, const float *v, int T, int n_heads,
                  int n_kv_heads, int head_dim, float *out, em_scratch *s) {
    int q_ld = n_heads * head_dim, kv_ld = n_kv_heads * head_dim;
    int group = n_heads / n_kv_heads;
    int blocks = (T + EM_ATTN_QUERY_BLOCK - 1) / EM_ATTN_QUERY_BLOCK;
    float scale = 1.0f / sqrtf((float)head_dim);
    bool parallel = (int64_t)n_heads * T * T / 2 * head_dim >= EM_PARALLEL_MIN_WORK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads) if (parallel)
    for (int task = 0; task < n_heads * blocks; task++) {
        /* later blocks first: they are the longest, so threads finish together */
        int h = task % n_heads, b = blocks - 1 - task / n_heads;
        int g = h / group;
        int q0 = b * EM_ATTN_QUERY_BLOCK;
        int q1 = q0 + EM_ATTN_QUERY_BLOCK < T ? q0 + EM_ATTN_QUERY_BLOCK : T;
        int rows = q1 - q0;
        float *scores = s->buf[omp_get_thread_num()]; /* (rows, q1) */
        /* scores = scale * Q[q0:q1, h] . K[0:q1, g]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, q1, head_dim, scale,
                    q + (size_t)q0 * q_ld + (size_t)h * head_dim, q_ld, k + (size_t)g * head_dim,
                    kv_ld, 0.0f, scores, q1);
        for (int i = 0; i < rows; i++) {
            float *row = scores + (size_t)i * q1;
            int n = q0 + i + 1; /* keys 0..q0+i are visible */
            float max = row[0];
            for (int j = 1; j < n; j++) max = row[j] > max ? row[j] : max;
            for (int j = 0; j < n; j++) row[j] -= max;
            em_exp_inplace(row, (size_t)n);
            float sum = 0.0f;
            for (int j = 0; j < n; j++) sum += row[j];
            float inv = 1.0f / sum;
            for (int j = 0; j < n; j++) row[j] *= inv;
            for (int j = n; j < q1; j++) row[j] = 0.0f;
        }
        /* out[q0:q1, h] = P (rows, q1) . V[0:q1, g] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, head_dim, q1, 1.0f, scores, q1,
                    v + (size_t)g * head_dim, kv_ld, 0.0f,
                    out + (size_t)q0 * q_ld + (size_t)h * head_dim, q_ld);
    }
}
