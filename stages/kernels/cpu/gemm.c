/* Packing, blocking and transposing around the GEMM microkernels (see gemm.h). The transposes use
 * SSE 4x4 blocks where the target has SSE (every x86-64), plain loops elsewhere and at edges;
 * they only move floats, so either way gives the same bits. */
#include "stages/kernels/cpu/gemm.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

int em_gemm_padded_tokens(int T) {
    return (T + EM_GEMM_TOKENS - 1) / EM_GEMM_TOKENS * EM_GEMM_TOKENS;
}

size_t em_gemm_result_stride(int T) {
    return (size_t)em_gemm_padded_tokens(T) + EM_GEMM_ROW_PAD;
}

int em_gemm_padded_rows(int rows) {
    return (rows + EM_GEMM_ROWS - 1) / EM_GEMM_ROWS * EM_GEMM_ROWS;
}

size_t em_gemm_packed_floats(int T, int K) {
    return (size_t)em_gemm_padded_tokens(T) * (size_t)K;
}

int em_gemm_panel_width(int T) {
    return T <= EM_GEMM_FEW_TOKENS ? T : EM_GEMM_PANEL;
}

int em_gemm_panel_count(int T) {
    return T <= EM_GEMM_FEW_TOKENS ? 1 : em_gemm_padded_tokens(T) / EM_GEMM_PANEL;
}

int em_gemm_panel_tokens(int T, int panel) {
    int width = em_gemm_panel_width(T), tokens = T - panel * width;
    return tokens < 0 ? 0 : tokens < width ? tokens : width;
}

void em_gemm_pack_panel(const float *x, size_t ldx, int T, int K, int panel, float *xp) {
    int width = em_gemm_panel_width(T);
    float *out = xp + (size_t)panel * K * width; /* (K, width) */
    int t0 = panel * width;
    int tokens = em_gemm_panel_tokens(T, panel);
    if (tokens < width) {
        for (int k = 0; k < K; k++) {
            for (int i = tokens; i < width; i++) out[(size_t)k * width + i] = 0.0f;
        }
    }
    em_transpose(x + (size_t)t0 * ldx, ldx, tokens, K, out, (size_t)width, false);
}

em_gemm_panels em_gemm_packed(const float *xp, int T, int K) {
    int width = em_gemm_panel_width(T);
    return (em_gemm_panels){xp, (size_t)width, (size_t)K * (size_t)width};
}

size_t em_gemm_packed_index(int T, int K, int t, int k) {
    size_t width = (size_t)em_gemm_panel_width(T);
    return (size_t)(t / EM_GEMM_PANEL) * (size_t)K * width + (size_t)k * width +
           (size_t)(t % EM_GEMM_PANEL);
}

void em_gemm_tile(em_gemm_microkernel *kernel, em_gemm_panels xp, int T, int K, const float *wt,
                  size_t ldw, int rows, float *ct, size_t ldc) {
    static const float zeros[EM_GEMM_KC]; /* stands in for the rows past `rows` */
    if (T <= EM_GEMM_FEW_TOKENS) {        /* the tokens are in the first panel */
        em_gemm_few_tokens_for(kernel)(K, xp.x, xp.column_stride, T, wt, ldw, rows, ct, ldc);
        return;
    }
    for (int k0 = 0; k0 < K; k0 += EM_GEMM_KC) {
        int kc = K - k0 < EM_GEMM_KC ? K - k0 : EM_GEMM_KC;
        for (int t0 = 0; t0 < em_gemm_padded_tokens(T); t0 += EM_GEMM_TOKENS) {
            const float *x = xp.x + (size_t)(t0 / EM_GEMM_PANEL) * xp.panel_stride +
                             (size_t)k0 * xp.column_stride;
            int panels = T - t0 > EM_GEMM_PANEL ? 2 : 1; /* a panel of padding only is skipped */
            for (int j0 = 0; j0 < rows; j0 += EM_GEMM_ROWS) {
                const float *w[EM_GEMM_ROWS];
                for (int r = 0; r < EM_GEMM_ROWS; r++) {
                    w[r] = j0 + r < rows ? wt + (size_t)(j0 + r) * ldw + k0 : zeros;
                }
                kernel(kc, x, xp.column_stride, xp.panel_stride, panels, w,
                       ct + (size_t)j0 * ldc + t0, ldc, k0 == 0);
            }
        }
    }
}

void em_transpose(const float *src, size_t lds, int rows, int cols, float *dst, size_t ldd,
                  bool accumulate) {
    int c = 0;
#if defined(__SSE__)
    for (; c + 4 <= cols; c += 4) {
        int r = 0;
        for (; r + 4 <= rows; r += 4) {
            const float *in = src + (size_t)r * lds + c;
            __m128 r0 = _mm_loadu_ps(in), r1 = _mm_loadu_ps(in + lds);
            __m128 r2 = _mm_loadu_ps(in + 2 * lds), r3 = _mm_loadu_ps(in + 3 * lds);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3); /* now r_i is column c+i, rows r..r+3 */
            float *out = dst + (size_t)c * ldd + r;
            if (accumulate) {
                r0 = _mm_add_ps(_mm_loadu_ps(out), r0);
                r1 = _mm_add_ps(_mm_loadu_ps(out + ldd), r1);
                r2 = _mm_add_ps(_mm_loadu_ps(out + 2 * ldd), r2);
                r3 = _mm_add_ps(_mm_loadu_ps(out + 3 * ldd), r3);
            }
            _mm_storeu_ps(out, r0);
            _mm_storeu_ps(out + ldd, r1);
            _mm_storeu_ps(out + 2 * ldd, r2);
            _mm_storeu_ps(out + 3 * ldd, r3);
        }
        for (; r < rows; r++) {
            for (int i = 0; i < 4; i++) {
                float v = src[(size_t)r * lds + c + i];
                float *out = dst + (size_t)(c + i) * ldd + r;
                *out = accumulate ? *out + v : v;
            }
        }
    }
#endif
    for (; c < cols; c++) {
        for (int r = 0; r < rows; r++) {
            float v = src[(size_t)r * lds + c];
            float *out = dst + (size_t)c * ldd + r;
            *out = accumulate ? *out + v : v;
        }
    }
}
