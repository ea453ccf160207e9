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

#include "stages/kernels/cpu/transpose16_avx512.h"
#endif

/* Plain C: the definition the vector kernels must match bit for bit. fmaf rounds once, as the
 * vector fused multiply-adds do. */
static void microkernel_c(int kc, const float *xp, size_t column_stride, size_t panel_stride,
                          int panels, const float *const *w, float *ct, size_t ldc, bool first) {
    int tokens = panels * EM_GEMM_PANEL;
    float acc[EM_GEMM_ROWS][EM_GEMM_TOKENS];
    for (int j = 0; j < EM_GEMM_ROWS; j++) {
        for (int t = 0; t < tokens; t++) acc[j][t] = first ? 0.0f : ct[j * ldc + t];
    }
    for (int k = 0; k < kc; k++) {
        for (int j = 0; j < EM_GEMM_ROWS; j++) {
            float wk = w[j][k];
            for (int t = 0; t < tokens; t++) {
                const float *panel = xp + (size_t)(t / EM_GEMM_PANEL) * panel_stride;
                acc[j][t] = fmaf(panel[k * column_stride + t % EM_GEMM_PANEL], wk, acc[j][t]);
            }
        }
    }
    for (int j = 0; j < EM_GEMM_ROWS; j++) {
        for (int t = 0; t < tokens; t++) ct[j * ldc + t] = acc[j][t];
    }
}

/* The few-token kernels' block: blk (kb, FEW_TOKENS_ROWS) = rows j0.. of w at columns
 * k0 .. k0 + kb - 1, transposed, with zeros for the rows past `rows`. */
#define FEW_TOKENS_KB 64
#define FEW_TOKENS_ROWS 64
static void few_tokens_block(const float *w, size_t ldw, int rows, int j0, int k0, int kb,
                             float *blk) {
    int n = rows - j0 < FEW_TOKENS_ROWS ? rows - j0 : FEW_TOKENS_ROWS;
    for (int k = 0; k < kb; k++)
        for (int r = n; r < FEW_TOKENS_ROWS; r++) blk[k * FEW_TOKENS_ROWS + r] = 0.0f;
    em_transpose(w + (size_t)j0 * ldw + k0, ldw, n, kb, blk, FEW_TOKENS_ROWS, false);
}

/* Stores a group's sums: sums[t][r] to ct[(j0 + r) * ldc + t] for the T tokens and the rows up to
 * `rows`. */
static void few_tokens_store(const float (*sums)[FEW_TOKENS_ROWS], int T, int rows, int j0,
                             float *ct, size_t ldc) {
    for (int r = 0; r < FEW_TOKENS_ROWS && j0 + r < rows; r++)
        for (int t = 0; t < T; t++) ct[(size_t)(j0 + r) * ldc + t] = sums[t][r];
}

static void few_tokens_c(int K, const float *x, size_t column_stride, int T, const float *w,
                         size_t ldw, int rows, float *ct, size_t ldc) {
    float blk[FEW_TOKENS_KB * FEW_TOKENS_ROWS];
    for (int j0 = 0; j0 < rows; j0 += FEW_TOKENS_ROWS) {
        float acc[EM_GEMM_FEW_TOKENS][FEW_TOKENS_ROWS] = {{0}};
        for (int k0 = 0; k0 < K; k0 += FEW_TOKENS_KB) {
            int kb = K - k0 < FEW_TOKENS_KB ? K - k0 : FEW_TOKENS_KB;
            few_tokens_block(w, ldw, rows, j0, k0, kb, blk);
            for (int k = 0; k < kb; k++)
                for (int t = 0; t < T; t++) {
                    float xk = x[(size_t)(k0 + k) * column_stride + (size_t)t];
                    for (int r = 0; r < FEW_TOKENS_ROWS; r++)
                        acc[t][r] = fmaf(xk, blk[k * FEW_TOKENS_ROWS + r], acc[t][r]);
                }
        }
        few_tokens_store(acc, T, rows, j0, ct, ldc);
    }
}

static void few_tokens_transposed_c(int K, const float *x, size_t column_stride, int T,
                                    const float *wt, size_t ldw, int rows, float *c, size_t ldc) {
    for (int j = 0; j < rows; j++)
        for (int t = 0; t < T; t++) c[(size_t)j * ldc + t] = 0.0f;
    for (int k = 0; k < K; k++)
        for (int t = 0; t < T; t++) {
            float xk = x[(size_t)k * column_stride + (size_t)t];
            for (int j = 0; j < rows; j++)
                c[(size_t)j * ldc + t] = fmaf(xk, wt[(size_t)k * ldw + j], c[(size_t)j * ldc + t]);
        }
}

#ifdef EM_GEMM_X86
/* AVX-512: 12 rows x P panels of 16 tokens in 12 P zmm accumulators; per column k, P panel loads
 * and 12 broadcasts feed 12 P fused multiply-adds. P is a constant where it is inlined. */
__attribute__((target("avx512f"), always_inline)) static inline void
microkernel_avx512_p(int P, int kc, const float *xp, size_t column_stride, size_t panel_stride,
                     const float *const *w, float *ct, size_t ldc, bool first) {
    __m512 acc[EM_GEMM_ROWS][2];
#pragma GCC unroll 12
    for (int j = 0; j < EM_GEMM_ROWS; j++)
#pragma GCC unroll 2
        for (int p = 0; p < P; p++)
            acc[j][p] =
                first ? _mm512_setzero_ps() : _mm512_loadu_ps(ct + j * ldc + p * EM_GEMM_PANEL);
    for (int k = 0; k < kc; k++) {
        __m512 x[2];
#pragma GCC unroll 2
        for (int p = 0; p < P; p++)
            x[p] = _mm512_loadu_ps(xp + p * panel_stride + k * column_stride);
#pragma GCC unroll 12
        for (int j = 0; j < EM_GEMM_ROWS; j++) {
            __m512 wk = _mm512_set1_ps(w[j][k]);
#pragma GCC unroll 2
            for (int p = 0; p < P; p++) acc[j][p] = _mm512_fmadd_ps(x[p], wk, acc[j][p]);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < EM_GEMM_ROWS; j++)
#pragma GCC unroll 2
        for (int p = 0; p < P; p++) _mm512_storeu_ps(ct + j * ldc + p * EM_GEMM_PANEL, acc[j][p]);
}

__attribute__((target("avx512f"))) static void
microkernel_avx512(int kc, const float *xp, size_t column_stride, size_t panel_stride, int panels,
                   const float *const *w, float *ct, size_t ldc, bool first) {
    if (panels == 1)
        microkernel_avx512_p(1, kc, xp, column_stride, panel_stride, w, ct, ldc, first);
    else
        microkernel_avx512_p(2, kc, xp, column_stride, panel_stride, w, ct, ldc, first);
}

/* AVX2: 16 ymm registers hold 6 rows x 16 tokens (12 accumulators, two token vectors, a
 * broadcast), so the 12 rows x 16 P tokens are done as 2 P such passes. */
__attribute__((target("avx2,fma"))) static void
microkernel_avx2(int kc, const float *xp, size_t column_stride, size_t panel_stride, int panels,
                 const float *const *w, float *ct, size_t ldc, bool first) {
    for (int pass = 0; pass < 2 * panels; pass++) {
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

/* Calls body(T, ...) with T (1 to EM_GEMM_FEW_TOKENS) a constant, so an always-inline body
 * unrolls its loops over the tokens. */
#define FEW_TOKENS_CONSTANT(body, T, ...)                                                          \
    switch (T) {                                                                                   \
    case 1:                                                                                        \
        body(1, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 2:                                                                                        \
        body(2, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    case 3:                                                                                        \
        body(3, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    default:                                                                                       \
        body(4, __VA_ARGS__);                                                                      \
        break;                                                                                     \
    }

/* A few tokens, AVX-512: 16 rows per pass, one zmm accumulator per token. The rows are read 16
 * columns at a time (masked past K) and transposed in registers, so each column's 16 rows are one
 * vector, multiplied into every token's sums in column order. T is a constant where it is
 * inlined, so the loops over the tokens unroll into registers; so do the loops over a whole
 * block's 16 columns, which keeps v in registers (indexed by a variable, v lived on the stack:
 * every transposed vector was stored and loaded again). */
__attribute__((target("avx512f"), always_inline)) static inline void
few_tokens_avx512_n(int T, int K, const float *x, size_t column_stride, const float *w, size_t ldw,
                    int rows, float *ct, size_t ldc) {
    for (int j0 = 0; j0 < rows; j0 += 16) {
        int n = rows - j0 < 16 ? rows - j0 : 16;
        __m512 acc[EM_GEMM_FEW_TOKENS];
        for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
        for (int k0 = 0; k0 < K; k0 += 16) {
            int kb = K - k0 < 16 ? K - k0 : 16;
            __mmask16 cols = (__mmask16)((1u << kb) - 1u);
            __m512 v[16];
            for (int r = 0; r < 16; r++)
                v[r] = r < n ? _mm512_maskz_loadu_ps(cols, w + (size_t)(j0 + r) * ldw + k0)
                             : _mm512_setzero_ps();
            em_transpose16_avx512(v);
            if (kb == 16) { /* v indexed by constants: it stays in registers */
#pragma GCC unroll 16
                for (int c = 0; c < 16; c++) {
                    const float *xc = x + (size_t)(k0 + c) * column_stride;
#pragma GCC unroll 4
                    for (int t = 0; t < T; t++)
                        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(xc[t]), v[c], acc[t]);
                }
            } else { /* the last columns: v through memory */
                float tail[16][16];
#pragma GCC unroll 16
                for (int c = 0; c < 16; c++) _mm512_storeu_ps(tail[c], v[c]);
                for (int c = 0; c < kb; c++) {
                    const float *xc = x + (size_t)(k0 + c) * column_stride;
                    __m512 column = _mm512_loadu_ps(tail[c]);
#pragma GCC unroll 4
                    for (int t = 0; t < T; t++)
                        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(xc[t]), column, acc[t]);
                }
            }
        }
        float sums[EM_GEMM_FEW_TOKENS][16];
        for (int t = 0; t < T; t++) _mm512_storeu_ps(sums[t], acc[t]);
        for (int r = 0; r < n; r++)
            for (int t = 0; t < T; t++) ct[(size_t)(j0 + r) * ldc + t] = sums[t][r];
    }
}

__attribute__((target("avx512f"))) static void few_tokens_avx512(int K, const float *x,
                                                                 size_t column_stride, int T,
                                                                 const float *w, size_t ldw,
                                                                 int rows, float *ct, size_t ldc) {
    FEW_TOKENS_CONSTANT(few_tokens_avx512_n, T, K, x, column_stride, w, ldw, rows, ct, ldc);
}

/* A few tokens, the weight transposed, AVX-512: 64 rows per pass in 4 zmm accumulators per token
 * (masked loads past `rows`), each row vector loaded once for all the tokens. */
__attribute__((target("avx512f"), always_inline)) static inline void
few_tokens_transposed_avx512_n(int T, int K, const float *x, size_t column_stride, const float *wt,
                               size_t ldw, int rows, float *c, size_t ldc) {
    for (int j0 = 0; j0 < rows; j0 += 64) {
        __mmask16 live[4];
        __m512 acc[EM_GEMM_FEW_TOKENS][4];
        for (int v = 0; v < 4; v++) {
            int n = rows - j0 - 16 * v;
            live[v] = n >= 16 ? (__mmask16)0xffff : n > 0 ? (__mmask16)((1u << n) - 1) : 0;
            for (int t = 0; t < T; t++) acc[t][v] = _mm512_setzero_ps();
        }
        for (int k = 0; k < K; k++) {
            const float *row = wt + (size_t)k * ldw + j0, *xk = x + (size_t)k * column_stride;
            __m512 r[4];
            for (int v = 0; v < 4; v++) r[v] = _mm512_maskz_loadu_ps(live[v], row + 16 * v);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                __m512 xt = _mm512_set1_ps(xk[t]);
                for (int v = 0; v < 4; v++) acc[t][v] = _mm512_fmadd_ps(xt, r[v], acc[t][v]);
            }
        }
        float sums[64];
        for (int t = 0; t < T; t++) {
            for (int v = 0; v < 4; v++) _mm512_storeu_ps(sums + 16 * v, acc[t][v]);
            for (int j = j0; j < rows && j < j0 + 64; j++) c[(size_t)j * ldc + t] = sums[j - j0];
        }
    }
}

__attribute__((target("avx512f"))) static void
few_tokens_transposed_avx512(int K, const float *x, size_t column_stride, int T, const float *wt,
                             size_t ldw, int rows, float *c, size_t ldc) {
    FEW_TOKENS_CONSTANT(few_tokens_transposed_avx512_n, T, K, x, column_stride, wt, ldw, rows, c,
                        ldc);
}

/* A few tokens, AVX2: 64 rows in 8 ymm accumulators, one token at a time over the block (held in
 * L1 for the next token): 16 ymm registers hold no more. */
__attribute__((target("avx2,fma"))) static void few_tokens_avx2(int K, const float *x,
                                                                size_t column_stride, int T,
                                                                const float *w, size_t ldw,
                                                                int rows, float *ct, size_t ldc) {
    float blk[FEW_TOKENS_KB * FEW_TOKENS_ROWS];
    float sums[EM_GEMM_FEW_TOKENS][FEW_TOKENS_ROWS];
    for (int j0 = 0; j0 < rows; j0 += FEW_TOKENS_ROWS) {
        __m256 acc[EM_GEMM_FEW_TOKENS][8];
        for (int t = 0; t < T; t++)
            for (int v = 0; v < 8; v++) acc[t][v] = _mm256_setzero_ps();
        for (int k0 = 0; k0 < K; k0 += FEW_TOKENS_KB) {
            int kb = K - k0 < FEW_TOKENS_KB ? K - k0 : FEW_TOKENS_KB;
            few_tokens_block(w, ldw, rows, j0, k0, kb, blk);
            for (int t = 0; t < T; t++) {
                __m256 a[8];
                for (int v = 0; v < 8; v++) a[v] = acc[t][v];
                for (int k = 0; k < kb; k++) {
                    __m256 xk = _mm256_set1_ps(x[(size_t)(k0 + k) * column_stride + (size_t)t]);
                    const float *b = blk + k * FEW_TOKENS_ROWS;
#pragma GCC unroll 8
                    for (int v = 0; v < 8; v++)
                        a[v] = _mm256_fmadd_ps(xk, _mm256_loadu_ps(b + 8 * v), a[v]);
                }
                for (int v = 0; v < 8; v++) acc[t][v] = a[v];
            }
        }
        for (int t = 0; t < T; t++)
            for (int v = 0; v < 8; v++) _mm256_storeu_ps(sums[t] + 8 * v, acc[t][v]);
        few_tokens_store(sums, T, rows, j0, ct, ldc);
    }
}

/* A few tokens, the weight transposed, AVX2: 32 rows per pass in 4 ymm accumulators, one token at
 * a time (masked loads past `rows`). */
__attribute__((target("avx2,fma"))) static void
few_tokens_transposed_avx2(int K, const float *x, size_t column_stride, int T, const float *wt,
                           size_t ldw, int rows, float *c, size_t ldc) {
    for (int j0 = 0; j0 < rows; j0 += 32) {
        __m256i live[4];
        for (int v = 0; v < 4; v++) {
            int n = rows - j0 - 8 * v;
            live[v] =
                _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        }
        for (int t = 0; t < T; t++) {
            __m256 acc[4];
            for (int v = 0; v < 4; v++) acc[v] = _mm256_setzero_ps();
            for (int k = 0; k < K; k++) {
                __m256 xk = _mm256_set1_ps(x[(size_t)k * column_stride + (size_t)t]);
                const float *row = wt + (size_t)k * ldw + j0;
                for (int v = 0; v < 4; v++)
                    acc[v] = _mm256_fmadd_ps(xk, _mm256_maskload_ps(row + 8 * v, live[v]), acc[v]);
            }
            float sums[32];
            for (int v = 0; v < 4; v++) _mm256_storeu_ps(sums + 8 * v, acc[v]);
            for (int j = j0; j < rows && j < j0 + 32; j++) c[(size_t)j * ldc + t] = sums[j - j0];
        }
    }
}
#endif

/* Each microkernel with its few-token kernels: one row per instruction set. */
static const struct {
    em_gemm_microkernel *microkernel;
    em_gemm_few_tokens *few_tokens;
    em_gemm_few_tokens_transposed *few_tokens_transposed;
} few_tokens_table[] = {
#ifdef EM_GEMM_X86
    {microkernel_avx512, few_tokens_avx512, few_tokens_transposed_avx512},
    {microkernel_avx2, few_tokens_avx2, few_tokens_transposed_avx2},
#endif
    {microkernel_c, few_tokens_c, few_tokens_transposed_c},
};

em_gemm_few_tokens *em_gemm_few_tokens_for(em_gemm_microkernel *kernel) {
    for (size_t i = 0; i < sizeof few_tokens_table / sizeof few_tokens_table[0]; i++)
        if (few_tokens_table[i].microkernel == kernel) return few_tokens_table[i].few_tokens;
    return few_tokens_c;
}

em_gemm_few_tokens_transposed *em_gemm_few_tokens_transposed_for(em_gemm_microkernel *kernel) {
    for (size_t i = 0; i < sizeof few_tokens_table / sizeof few_tokens_table[0]; i++)
        if (few_tokens_table[i].microkernel == kernel)
            return few_tokens_table[i].few_tokens_transposed;
    return few_tokens_transposed_c;
}

em_gemm_microkernel *em_gemm_microkernel_avx512(void) {
#ifdef EM_GEMM_X86
    if (__builtin_cpu_supports("avx512f")) return microkernel_avx512;
#endif
    return NULL;
}

em_status em_gemm_microkernel_select(em_gemm_microkernel **kernel, const char **name) {
    bool avx512 = false, avx2 = false;
#ifdef EM_GEMM_X86
    avx512 = __builtin_cpu_supports("avx512f");
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    const char *wanted = getenv("EVALMESH_CPU_KERNEL");
    /* unset, a name of the ggml dot products' table that has no microkernel, or a kernel of the
     * bf16 precision's table that is not a microkernel here (bf16_dot.h): the best */
    if (!wanted || !*wanted || strcmp(wanted, "avx512vnni") == 0 || strcmp(wanted, "amx") == 0 ||
        strcmp(wanted, "avxvnni") == 0 ||
        (strcmp(wanted, "c") != 0 && strcmp(wanted, "avx512") != 0 && em_bf16_kernel_named(wanted)))
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
