/* ggml's reference 8-bit rounding of a linear layer's activations (see q8_activations.h). */
#include "stages/kernels/cpu/q8_activations.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/half.h"
#include "stages/formats/quantize_search.h"
#include "stages/kernels/cpu/scratch.h"

static float f16_round(float f) {
    return em_f16_to_f32(em_f32_to_f16(f));
}

/* Block b of token t (t < T) as quantize_row_q8_1_ref makes it. */
static void quantize_block(em_gemm_panels x, int t, int b, em_q8_activations *q) {
    const float *v = x.x + (size_t)(t / EM_GEMM_PANEL) * x.panel_stride +
                     (size_t)b * EM_Q8_BLOCK * x.column_stride + t % EM_GEMM_PANEL;
    float amax = 0.0f;
    for (int j = 0; j < EM_Q8_BLOCK; j++) {
        float a = fabsf(v[(size_t)j * x.column_stride]);
        amax = amax > a ? amax : a;
    }
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    size_t at = (size_t)b * q->tokens + t;
    int8_t *qs = q->qs + at * EM_Q8_BLOCK;
    int sum = 0;
    for (int j = 0; j < EM_Q8_BLOCK; j++) {
        qs[j] = (int8_t)roundf(v[(size_t)j * x.column_stride] * id);
        sum += qs[j];
    }
    q->d[at] = f16_round(d);
    q->s[at] = f16_round((float)sum * d);
    q->sum[at] = sum;
}

em_status em_q8_reserve(em_q8_activations *q, int T, int K) {
    size_t n = (size_t)(K / EM_Q8_BLOCK) * (size_t)em_q8_padded_tokens(T);
    size_t nk = (size_t)(K / EM_Q8K_BLOCK) * (size_t)em_q8_padded_tokens(T);
    size_t groups = (size_t)(em_q8_padded_tokens(T) + 15) / 16;
    size_t lane_bytes = groups * (size_t)(K / EM_Q8_BLOCK) * EM_Q8_LANE_BYTES;
    if (n <= q->capacity && nk <= q->kcapacity && lane_bytes <= q->lanes_capacity) return NULL;
    em_q8_activations_free(q);
    q->qs = malloc(n * EM_Q8_BLOCK);
    q->d = malloc(n * sizeof(float));
    q->s = malloc(n * sizeof(float));
    q->sum = malloc(n * sizeof(int32_t));
    q->kqs = malloc(nk * EM_Q8K_BLOCK + 1);
    q->kd = malloc(nk * sizeof(float) + 1);
    q->kbsums = malloc(nk * 16 * sizeof(int16_t) + 1);
    q->lanes = aligned_alloc(64, lane_bytes + 64);
    if (!q->qs || !q->d || !q->s || !q->sum || !q->kqs || !q->kd || !q->kbsums || !q->lanes) {
        em_q8_activations_free(q);
        return em_error_new(EM_EXIT_RUNTIME,
                            "out of memory for the 8-bit activations of %d positions", T);
    }
    q->capacity = n;
    q->kcapacity = nk;
    q->lanes_capacity = lane_bytes;
    return NULL;
}

em_status em_q8_reserve_f16(em_q8_activations *q, int T, int K) {
    size_t nh = (size_t)em_q8_padded_tokens(T) * (size_t)((K + 15) / 16 * 16);
    if (nh <= q->hcapacity) return NULL;
    free(q->h);
    q->h = aligned_alloc(64, (nh * sizeof(float) + 63) / 64 * 64 + 64);
    if (!q->h) {
        em_q8_activations_free(q);
        return em_error_new(EM_EXIT_RUNTIME,
                            "out of memory for the fp16 activations of %d positions", T);
    }
    q->hcapacity = nh;
    return NULL;
}

em_status em_q8_reserve_k_lanes(em_q8_activations *q, int T, int K, bool q4k, bool q6k) {
    size_t pairs = (size_t)(em_q8_padded_tokens(T) + 15) / 16 * (size_t)(K / EM_Q8K_BLOCK);
    bool ok = true;
    if (q4k && pairs > q->k4capacity) {
        free(q->k4lanes);
        free(q->k4bsums);
        q->k4lanes = aligned_alloc(64, pairs * 64 * 64 + 64);
        q->k4bsums = aligned_alloc(64, pairs * 8 * 64 + 64);
        q->k4capacity = pairs;
        ok = q->k4lanes && q->k4bsums;
    }
    if (ok && q6k && pairs > q->k6capacity) {
        free(q->k6lanes);
        q->k6lanes = aligned_alloc(64, pairs * 128 * 64 + 64);
        q->k6capacity = pairs;
        ok = q->k6lanes != NULL;
    }
    if (!ok) {
        em_q8_activations_free(q);
        return em_error_new(EM_EXIT_RUNTIME,
                            "out of memory for the K-quant activation lanes of %d positions", T);
    }
    return NULL;
}

/* Q8_K block b of token t (t < T) as quantize_row_q8_K_ref makes it. */
static void quantize_k_block(em_gemm_panels x, int t, int b, em_q8_activations *q) {
    const float *v = x.x + (size_t)(t / EM_GEMM_PANEL) * x.panel_stride +
                     (size_t)b * EM_Q8K_BLOCK * x.column_stride + t % EM_GEMM_PANEL;
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < EM_Q8K_BLOCK; j++) {
        float value = v[(size_t)j * x.column_stride], a = fabsf(value);
        if (a > amax) {
            amax = a;
            max = value;
        }
    }
    size_t at = (size_t)b * q->tokens + t;
    int8_t *qs = q->kqs + at * EM_Q8K_BLOCK;
    int16_t *bsums = q->kbsums + at * 16;
    if (!amax) {
        memset(qs, 0, EM_Q8K_BLOCK);
        memset(bsums, 0, 16 * sizeof *bsums);
        q->kd[at] = 0.0f;
        return;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < EM_Q8K_BLOCK; j++) {
        int n = em_nearest_int(iscale * v[(size_t)j * x.column_stride]);
        qs[j] = (int8_t)(n < 127 ? n : 127);
    }
    for (int j = 0; j < 16; j++) {
        int sum = 0;
        for (int i = 0; i < 16; i++) sum += qs[16 * j + i];
        bsums[j] = (int16_t)sum;
    }
    q->kd[at] = 1 / iscale;
}

/* Block b of padding token t in either form: zeros, so its products are 0. */
static void zero_block(em_gemm_panels x, int t, int b, em_q8_activations *q) {
    size_t at = (size_t)b * q->tokens + t;
    memset(q->qs + at * EM_Q8_BLOCK, 0, EM_Q8_BLOCK);
    q->d[at] = q->s[at] = 0.0f;
    q->sum[at] = 0;
}

static void zero_k_block(em_gemm_panels x, int t, int b, em_q8_activations *q) {
    size_t at = (size_t)b * q->tokens + t;
    memset(q->kqs + at * EM_Q8K_BLOCK, 0, EM_Q8K_BLOCK);
    memset(q->kbsums + at * 16, 0, 16 * sizeof(int16_t));
    q->kd[at] = 0.0f;
}

typedef void block_fn(em_gemm_panels x, int t, int b, em_q8_activations *q);
typedef void panel_fn(em_gemm_panels x, int panel, int n, int b, em_q8_activations *q);

/* Every block (blocks of them per token) of the T tokens and the padding ones: a panel of 16
 * tokens at a time by `panel` when it is not NULL and x is in such panels, else token by token by
 * `quantize`. */
static void quantize_blocks(em_gemm_panels x, int T, int K, int blocks, int threads,
                            block_fn *quantize, panel_fn *panel, block_fn *zero,
                            em_q8_activations *q) {
    q->T = T;
    q->tokens = em_q8_padded_tokens(T);
    bool parallel = (int64_t)T * K >= EM_PARALLEL_MIN_ELEMENTS;
#pragma omp parallel for num_threads(threads) if (parallel)
    for (int b = 0; b < blocks; b++) {
        if (panel && x.column_stride == EM_GEMM_PANEL)
            for (int p = 0; p * EM_GEMM_PANEL < T; p++) {
                int n = T - p * EM_GEMM_PANEL;
                panel(x, p, n < EM_GEMM_PANEL ? n : EM_GEMM_PANEL, b, q);
            }
        else
            for (int t = 0; t < T; t++) quantize(x, t, b, q);
        for (int t = T; t < q->tokens; t++) zero(x, t, b, q);
    }
}

void em_q8_quantize_as(em_gemm_panels x, int T, int K, int threads, bool vector,
                       em_q8_activations *q) {
    q->blocks = K / EM_Q8_BLOCK;
    quantize_blocks(x, T, K, q->blocks, threads, vector ? em_q8_block_token_avx512 : quantize_block,
                    vector ? em_q8_block_panel_avx512 : NULL, zero_block, q);
}

void em_q8k_quantize_as(em_gemm_panels x, int T, int K, int threads, bool vector,
                        em_q8_activations *q) {
    q->kblocks = K / EM_Q8K_BLOCK;
    quantize_blocks(x, T, K, q->kblocks, threads, quantize_k_block,
                    vector ? em_q8k_block_panel_avx512 : NULL, zero_k_block, q);
}

void em_q8_quantize(em_gemm_panels x, int T, int K, int threads, em_q8_activations *q) {
    em_q8_quantize_as(x, T, K, threads, em_q8_avx512_runs_here(), q);
}

void em_q8k_quantize(em_gemm_panels x, int T, int K, int threads, em_q8_activations *q) {
    em_q8k_quantize_as(x, T, K, threads, em_q8_avx512_runs_here(), q);
}

void em_q8_activations_free(em_q8_activations *q) {
    free(q->lanes);
    free(q->k4lanes);
    free(q->k4bsums);
    free(q->k6lanes);
    free(q->kqs);
    free(q->kd);
    free(q->kbsums);
    free(q->qs);
    free(q->d);
    free(q->s);
    free(q->sum);
    free(q->h);
    *q = (em_q8_activations){0};
}
