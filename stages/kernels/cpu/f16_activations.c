/* The F16 form of a linear layer's activations in the `ggml` precision (see q8_activations.h):
 * every value rounded to fp16 to nearest even (ggml's GGML_FP32_TO_FP16, F16's vec_dot_type),
 * kept as floats, token-major for the F16 dot products (ggml_dot.h). */
#include "stages/kernels/cpu/q8_activations.h"

#include <string.h>

#include "stages/formats/half.h"
#include "stages/kernels/cpu/scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Token t's K values of x into row, zeros up to hstride. */
static void gather_token(em_gemm_panels x, int t, int K, int hstride, float *row) {
    const float *v = x.x + (size_t)(t / EM_GEMM_PANEL) * x.panel_stride + t % EM_GEMM_PANEL;
    for (int k = 0; k < K; k++) row[k] = v[(size_t)k * x.column_stride];
    for (int k = K; k < hstride; k++) row[k] = 0.0f;
}

/* A NaN keeps its sign and top 10 payload bits, made quiet, as F16C's conversion keeps them. */
static void round_row_c(float *row, int n) {
    for (int k = 0; k < n; k++) {
        uint32_t u = em_f32_bits(row[k]);
        row[k] = (u & 0x7fffffffu) > 0x7f800000u ? em_f32_from_bits((u & 0xffffe000u) | 0x400000u)
                                                 : em_f16_to_f32(em_f32_to_f16(row[k]));
    }
}

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) static void round_row_f16c(float *row, int n) {
    for (int k = 0; k < n; k += 8) { /* n is a multiple of 16 */
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(row + k), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(row + k, _mm256_cvtph_ps(h));
    }
}

bool em_f16c_runs_here(void) {
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}
#else
static void round_row_f16c(float *row, int n) {
    round_row_c(row, n);
}

bool em_f16c_runs_here(void) {
    return false;
}
#endif

void em_f16_round_as(em_gemm_panels x, int T, int K, int threads, bool vector,
                     em_q8_activations *q) {
    q->T = T;
    q->tokens = em_q8_padded_tokens(T);
    q->hstride = (K + 15) / 16 * 16;
    bool parallel = (int64_t)T * K >= EM_PARALLEL_MIN_ELEMENTS;
#pragma omp parallel for num_threads(threads) if (parallel)
    for (int t = 0; t < T; t++) {
        float *row = q->h + (size_t)t * q->hstride;
        gather_token(x, t, K, q->hstride, row);
        if (vector)
            round_row_f16c(row, q->hstride);
        else
            round_row_c(row, q->hstride);
    }
    memset(q->h + (size_t)T * q->hstride, 0, (size_t)(q->tokens - T) * q->hstride * sizeof(float));
}

void em_f16_round(em_gemm_panels x, int T, int K, int threads, em_q8_activations *q) {
    em_f16_round_as(x, T, K, threads, em_f16c_runs_here(), q);
}
