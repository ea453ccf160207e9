/* The GEMM microkernels for AVX-512F, AVX2+FMA and plain C, and the choice between them (see
 * gemm_microkernel.h). */
#include "stages/kernels/cpu/gemm_microkernel.h"
#include "stages/kernels/cpu/gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/bf16_dot.h"

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

/* The one-token kernels' block: blk (kb, EM_GEMM_ONE_TOKEN_ROWS) = rows j0.. of w at columns
 * k0 .. k0 + kb - 1, transposed, with zeros for the rows past `rows`. */
#define ONE_TOKEN_KB 64
static void one_token_block(const float *w, size_t ldw, int rows, int j0, int k0, int kb,
                            float *blk) {
    int n = rows - j0 < EM_GEMM_ONE_TOKEN_ROWS ? rows - j0 : EM_GEMM_ONE_TOKEN_ROWS;
    for (int k = 0; k < kb; k++)
        for (int r = n; r < EM_GEMM_ONE_TOKEN_ROWS; r++) blk[k * EM_GEMM_ONE_TOKEN_ROWS + r] = 0.0f;
    em_transpose(w + (size_t)j0 * ldw + k0, ldw, n, kb, blk, EM_GEMM_ONE_TOKEN_ROWS, false);
}

/* Stores a group's sums: acc[r] to ct[(j0 + r) * ldc] for the rows up to `rows` rounded up to
 * EM_GEMM_ROWS (em_gemm_tile's promise). */
static void one_token_store(const float *acc, int rows, int j0, float *ct, size_t ldc) {
    int padded = (rows + EM_GEMM_ROWS - 1) / EM_GEMM_ROWS * EM_GEMM_ROWS;
    for (int r = 0; r < EM_GEMM_ONE_TOKEN_ROWS && j0 + r < padded; r++)
        ct[(size_t)(j0 + r) * ldc] = acc[r];
}

static void one_token_c(int K, const float *x, size_t x_stride, const float *w, size_t ldw,
                        int rows, float *ct, size_t ldc) {
    float blk[ONE_TOKEN_KB * EM_GEMM_ONE_TOKEN_ROWS];
    for (int j0 = 0; j0 < rows; j0 += EM_GEMM_ONE_TOKEN_ROWS) {
        float acc[EM_GEMM_ONE_TOKEN_ROWS] = {0};
        for (int k0 = 0; k0 < K; k0 += ONE_TOKEN_KB) {
            int kb = K - k0 < ONE_TOKEN_KB ? K - k0 : ONE_TOKEN_KB;
            one_token_block(w, ldw, rows, j0, k0, kb, blk);
            for (int k = 0; k < kb; k++) {
                float xk = x[(size_t)(k0 + k) * x_stride];
                for (int r = 0; r < EM_GEMM_ONE_TOKEN_ROWS; r++)
                    acc[r] = fmaf(xk, blk[k * EM_GEMM_ONE_TOKEN_ROWS + r], acc[r]);
            }
        }
        one_token_store(acc, rows, j0, ct, ldc);
    }
}

static void one_token_transposed_c(int K, const float *x, size_t x_stride, const float *wt,
                                   size_t ldw, int rows, float *c, size_t ldc) {
    for (int j = 0; j < rows; j++) c[(size_t)j * ldc] = 0.0f;
    for (int k = 0; k < K; k++) {
        float xk = x[(size_t)k * x_stride];
        for (int j = 0; j < rows; j++)
            c[(size_t)j * ldc] = fmaf(xk, wt[(size_t)k * ldw + j], c[(size_t)j * ldc]);
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

/* One token, AVX-512: 64 rows in 4 zmm accumulators, one broadcast of x[k] per column. */
__attribute__((target("avx512f"))) static void one_token_avx512(int K, const float *x,
                                                                size_t x_stride, const float *w,
                                                                size_t ldw, int rows, float *ct,
                                                                size_t ldc) {
    float blk[ONE_TOKEN_KB * EM_GEMM_ONE_TOKEN_ROWS], sums[EM_GEMM_ONE_TOKEN_ROWS];
    for (int j0 = 0; j0 < rows; j0 += EM_GEMM_ONE_TOKEN_ROWS) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        for (int k0 = 0; k0 < K; k0 += ONE_TOKEN_KB) {
            int kb = K - k0 < ONE_TOKEN_KB ? K - k0 : ONE_TOKEN_KB;
            one_token_block(w, ldw, rows, j0, k0, kb, blk);
            for (int k = 0; k < kb; k++) {
                __m512 xk = _mm512_set1_ps(x[(size_t)(k0 + k) * x_stride]);
                const float *b = blk + k * EM_GEMM_ONE_TOKEN_ROWS;
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++)
                    acc[v] = _mm512_fmadd_ps(xk, _mm512_loadu_ps(b + 16 * v), acc[v]);
            }
        }
        for (int v = 0; v < 4; v++) _mm512_storeu_ps(sums + 16 * v, acc[v]);
        one_token_store(sums, rows, j0, ct, ldc);
    }
}

/* One token, the weight transposed, AVX-512: 64 rows per pass in 4 zmm accumulators (masked
 * loads past `rows`). */
__attribute__((target("avx512f"))) static void
one_token_transposed_avx512(int K, const float *x, size_t x_stride, const float *wt, size_t ldw,
                            int rows, float *c, size_t ldc) {
    for (int j0 = 0; j0 < rows; j0 += 64) {
        __mmask16 live[4];
        __m512 acc[4];
        for (int v = 0; v < 4; v++) {
            int n = rows - j0 - 16 * v;
            live[v] = n >= 16 ? (__mmask16)0xffff : n > 0 ? (__mmask16)((1u << n) - 1) : 0;
            acc[v] = _mm512_setzero_ps();
        }
        for (int k = 0; k < K; k++) {
            __m512 xk = _mm512_set1_ps(x[(size_t)k * x_stride]);
            const float *row = wt + (size_t)k * ldw + j0;
            for (int v = 0; v < 4; v++)
                acc[v] = _mm512_fmadd_ps(xk, _mm512_maskz_loadu_ps(live[v], row + 16 * v), acc[v]);
        }
        float sums[64];
        for (int v = 0; v < 4; v++) _mm512_storeu_ps(sums + 16 * v, acc[v]);
        for (int j = j0; j < rows && j < j0 + 64; j++) c[(size_t)j * ldc] = sums[j - j0];
    }
}

/* One token, AVX2: 64 rows in 8 ymm accumulators. */
__attribute__((target("avx2,fma"))) static void one_token_avx2(int K, const float *x,
                                                               size_t x_stride, const float *w,
                                                               size_t ldw, int rows, float *ct,
                                                               size_t ldc) {
    float blk[ONE_TOKEN_KB * EM_GEMM_ONE_TOKEN_ROWS], sums[EM_GEMM_ONE_TOKEN_ROWS];
    for (int j0 = 0; j0 < rows; j0 += EM_GEMM_ONE_TOKEN_ROWS) {
        __m256 acc[8];
        for (int v = 0; v < 8; v++) acc[v] = _mm256_setzero_ps();
        for (int k0 = 0; k0 < K; k0 += ONE_TOKEN_KB) {
            int kb = K - k0 < ONE_TOKEN_KB ? K - k0 : ONE_TOKEN_KB;
            one_token_block(w, ldw, rows, j0, k0, kb, blk);
            for (int k = 0; k < kb; k++) {
                __m256 xk = _mm256_set1_ps(x[(size_t)(k0 + k) * x_stride]);
                const float *b = blk + k * EM_GEMM_ONE_TOKEN_ROWS;
#pragma GCC unroll 8
                for (int v = 0; v < 8; v++)
                    acc[v] = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 8 * v), acc[v]);
            }
        }
        for (int v = 0; v < 8; v++) _mm256_storeu_ps(sums + 8 * v, acc[v]);
        one_token_store(sums, rows, j0, ct, ldc);
    }
}

/* One token, the weight transposed, AVX2: 32 rows per pass in 4 ymm accumulators (masked loads
 * past `rows`). */
__attribute__((target("avx2,fma"))) static void
one_token_transposed_avx2(int K, const float *x, size_t x_stride, const float *wt, size_t ldw,
                          int rows, float *c, size_t ldc) {
    for (int j0 = 0; j0 < rows; j0 += 32) {
        __m256i live[4];
        __m256 acc[4];
        for (int v = 0; v < 4; v++) {
            int n = rows - j0 - 8 * v;
            live[v] =
                _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            acc[v] = _mm256_setzero_ps();
        }
        for (int k = 0; k < K; k++) {
            __m256 xk = _mm256_set1_ps(x[(size_t)k * x_stride]);
            const float *row = wt + (size_t)k * ldw + j0;
            for (int v = 0; v < 4; v++)
                acc[v] = _mm256_fmadd_ps(xk, _mm256_maskload_ps(row + 8 * v, live[v]), acc[v]);
        }
        float sums[32];
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(sums + 8 * v, acc[v]);
        for (int j = j0; j < rows && j < j0 + 32; j++) c[(size_t)j * ldc] = sums[j - j0];
    }
}
#endif

/* Each microkernel with its one-token kernels: one row per instruction set. */
static const struct {
    em_gemm_microkernel *microkernel;
    em_gemm_one_token *one_token;
    em_gemm_one_token_transposed *one_token_transposed;
} one_token_table[] = {
#ifdef EM_GEMM_X86
    {microkernel_avx512, one_token_avx512, one_token_transposed_avx512},
    {microkernel_avx2, one_token_avx2, one_token_transposed_avx2},
#endif
    {microkernel_c, one_token_c, one_token_transposed_c},
};

em_gemm_one_token *em_gemm_one_token_for(em_gemm_microkernel *kernel) {
    for (size_t i = 0; i < sizeof one_token_table / sizeof one_token_table[0]; i++)
        if (one_token_table[i].microkernel == kernel) return one_token_table[i].one_token;
    return one_token_c;
}

em_gemm_one_token_transposed *em_gemm_one_token_transposed_for(em_gemm_microkernel *kernel) {
    for (size_t i = 0; i < sizeof one_token_table / sizeof one_token_table[0]; i++)
        if (one_token_table[i].microkernel == kernel)
            return one_token_table[i].one_token_transposed;
    return one_token_transposed_c;
}

em_status em_gemm_microkernel_select(em_gemm_microkernel **kernel, const char **name) {
    bool avx512 = false, avx2 = false;
#ifdef EM_GEMM_X86
    avx512 = __builtin_cpu_supports("avx512f");
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    const char *wanted = getenv("EVALMESH_CPU_KERNEL");
    /* unset, a name of the ggml dot products' table that has no microkernel, or a kernel of the
     * bf16 precision's table other than c (bf16_dot.h): the best */
    if (!wanted || !*wanted || strcmp(wanted, "avx512vnni") == 0 || strcmp(wanted, "amx") == 0 ||
        strcmp(wanted, "avxvnni") == 0 ||
        (strcmp(wanted, "c") != 0 && em_bf16_kernel_named(wanted)))
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
