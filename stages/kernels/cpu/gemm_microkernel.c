/* The GEMM microkernels for AVX-512F, AVX2+FMA and plain C, and the choice between them (see
 * gemm_microkernel.h). */
#include "stages/kernels/cpu/gemm_microkernel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EM_GEMM_X86 1
#endif

/* Plain C: the definition the vector kernels must match bit for bit. fmaf rounds once, as the
 * vector fused multiply-adds do. */
static void microkernel_c(int kc, const float *xp, size_t column_stride, size_t panel_stride,
                          const float *const *w, float *ct, size_t ldc, bool first) {
    float acc[EM_GEMM_ROWS][EM_GEMM_TOKENS];
    for (int j = 0; j < EM_GEMM_ROWS; j++) {
        for (int t = 0; t < EM_GEMM_TOKENS; t++) acc[j][t] = first ? 0.0f : ct[j * ldc + t];
    }
    for (int k = 0; k < kc; k++) {
        for (int j = 0; j < EM_GEMM_ROWS; j++) {
            float wk = w[j][k];
            for (int t = 0; t < EM_GEMM_TOKENS; t++) {
                const float *panel = xp + (size_t)(t / EM_GEMM_PANEL) * panel_stride;
                acc[j][t] = fmaf(panel[k * column_stride + t % EM_GEMM_PANEL], wk, acc[j][t]);
            }
        }
    }
    for (int j = 0; j < EM_GEMM_ROWS; j++) {
        for (int t = 0; t < EM_GEMM_TOKENS; t++) ct[j * ldc + t] = acc[j][t];
    }
}

#ifdef EM_GEMM_X86
/* AVX-512: 12 rows x 2 panels of 16 tokens in 24 zmm accumulators; per column k, two panel loads
 * and 12 broadcasts feed 24 fused multiply-adds. */
__attribute__((target("avx512f"))) static void
microkernel_avx512(int kc, const float *xp, size_t column_stride, size_t panel_stride,
                   const float *const *w, float *ct, size_t ldc, bool first) {
    __m512 acc[EM_GEMM_ROWS][2];
#pragma GCC unroll 12
    for (int j = 0; j < EM_GEMM_ROWS; j++) {
        acc[j][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(ct + j * ldc);
        acc[j][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(ct + j * ldc + EM_GEMM_PANEL);
    }
    const float *x0 = xp, *x1 = xp + panel_stride;
    for (int k = 0; k < kc; k++) {
        __m512 a = _mm512_loadu_ps(x0 + k * column_stride);
        __m512 b = _mm512_loadu_ps(x1 + k * column_stride);
#pragma GCC unroll 12
        for (int j = 0; j < EM_GEMM_ROWS; j++) {
            __m512 wk = _mm512_set1_ps(w[j][k]);
            acc[j][0] = _mm512_fmadd_ps(a, wk, acc[j][0]);
            acc[j][1] = _mm512_fmadd_ps(b, wk, acc[j][1]);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < EM_GEMM_ROWS; j++) {
        _mm512_storeu_ps(ct + j * ldc, acc[j][0]);
        _mm512_storeu_ps(ct + j * ldc + EM_GEMM_PANEL, acc[j][1]);
    }
}

/* AVX2: 16 ymm registers hold 6 rows x 16 tokens (12 accumulators, two token vectors, a
 * broadcast), so the 12 rows x 32 tokens are done as four such passes. */
__attribute__((target("avx2,fma"))) static void
microkernel_avx2(int kc, const float *xp, size_t column_stride, size_t panel_stride,
                 const float *const *w, float *ct, size_t ldc, bool first) {
    for (int pass = 0; pass < 4; pass++) {
        int j0 = (pass % 2) * 6, panel = pass / 2;
        const float *x = xp + (size_t)panel * panel_stride;
        float *c = ct + (size_t)j0 * ldc + panel * EM_GEMM_PANEL;
        __m256 acc[6][2];
#pragma GCC unroll 6
        for (int j = 0; j < 6; j++) {
            acc[j][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + j * ldc);
            acc[j][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + j * ldc + 8);
        }
        for (int k = 0; k < kc; k++) {
            __m256 a = _mm256_loadu_ps(x + k * column_stride);
            __m256 b = _mm256_loadu_ps(x + k * column_stride + 8);
#pragma GCC unroll 6
            for (int j = 0; j < 6; j++) {
                __m256 wk = _mm256_broadcast_ss(w[j0 + j] + k);
                acc[j][0] = _mm256_fmadd_ps(a, wk, acc[j][0]);
                acc[j][1] = _mm256_fmadd_ps(b, wk, acc[j][1]);
            }
        }
#pragma GCC unroll 6
        for (int j = 0; j < 6; j++) {
            _mm256_storeu_ps(c + j * ldc, acc[j][0]);
            _mm256_storeu_ps(c + j * ldc + 8, acc[j][1]);
        }
    }
}
#endif

em_status em_gemm_microkernel_select(em_gemm_microkernel **kernel, const char **name) {
    bool avx512 = false, avx2 = false;
#ifdef EM_GEMM_X86
    avx512 = __builtin_cpu_supports("avx512f");
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    const char *wanted = getenv("EVALMESH_CPU_KERNEL");
    /* unset, or a name of the ggml dot products' table that has no microkernel: the best */
    if (!wanted || !*wanted || strcmp(wanted, "avx512vnni") == 0 || strcmp(wanted, "amx") == 0)
        wanted = avx512 ? "avx512" : avx2 ? "avx2" : "c";
    *name = wanted;
    if (strcmp(wanted, "c") == 0) {
        *kernel = microkernel_c;
        return NULL;
    }
#ifdef EM_GEMM_X86
    if (strcmp(wanted, "avx512") == 0 && avx512) {
        *kernel = microkernel_avx512;
        return NULL;
    }
    if (strcmp(wanted, "avx2") == 0 && avx2) {
        *kernel = microkernel_avx2;
        return NULL;
    }
#endif
    *kernel = NULL;
    if (strcmp(wanted, "avx512") == 0 || strcmp(wanted, "avx2") == 0) {
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "EVALMESH_CPU_KERNEL=%s, but this CPU cannot run that kernel", wanted);
    }
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "EVALMESH_CPU_KERNEL=%s is not a CPU kernel (" EM_CPU_KERNEL_NAMES ")",
                        wanted);
}
