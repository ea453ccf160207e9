/* The packed GEMM (stages/kernels/cpu/gemm.h) against its definition: every output element is the
 * chain acc = fmaf(x[t][k], w[j][k], acc) over k in order from 0, so the result must equal a
 * plain fmaf loop bit for bit, for every microkernel this CPU runs (avx512, avx2, c), for token
 * counts, widths and row counts that are not multiples of the panel, block or kernel sizes, and
 * with y += accumulation. With up to EM_GEMM_FEW_TOKENS tokens, the few-token kernel for weights
 * given transposed (attention's values as they are) gives the same chains, written at a stride.
 * Also the error for a wrong EVALMESH_CPU_KERNEL. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/gemm.h"
#include "kernels/kernel_skip.h"
#include "test.h"

static uint32_t seed = 7;

static float random_float(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)((int32_t)(seed >> 8) - (1 << 23)) / (float)(1 << 23); /* [-1, 1) */
}

/* One product y (T, rows) [+]= x (T, K) W^T through pack, tile and transpose. */
static void gemm(em_gemm_microkernel *kernel, const float *x, int T, int K, const float *w,
                 int rows, float *y, bool accumulate) {
    size_t ldw = (size_t)K + EM_GEMM_ROW_PAD;
    /* exactly the packed panels' floats (a narrow panel's T x K): a read past them is ASan's */
    float *xp = malloc((size_t)em_gemm_panel_count(T) * em_gemm_panel_width(T) * K * sizeof(float));
    float *wt = malloc((size_t)rows * ldw * sizeof(float));
    float *ct =
        malloc((size_t)em_gemm_padded_rows(rows) * em_gemm_result_stride(T) * sizeof(float));
    for (int p = 0; p < em_gemm_panel_count(T); p++) em_gemm_pack_panel(x, (size_t)K, T, K, p, xp);
    for (int j = 0; j < rows; j++) memcpy(wt + j * ldw, w + (size_t)j * K, K * sizeof(float));
    em_gemm_tile(kernel, em_gemm_packed(xp, T, K), T, K, wt, ldw, rows, ct,
                 em_gemm_result_stride(T));
    em_transpose(ct, em_gemm_result_stride(T), rows, T, y, (size_t)rows, accumulate);
    free(xp);
    free(wt);
    free(ct);
}

static void check_shape(em_gemm_microkernel *kernel, const char *name, int T, int K, int rows) {
    float *x = malloc((size_t)T * K * sizeof(float));
    float *w = malloc((size_t)rows * K * sizeof(float));
    float *y0 = malloc((size_t)T * rows * sizeof(float));
    float *y = malloc((size_t)T * rows * sizeof(float));
    float *chain = malloc((size_t)T * rows * sizeof(float));
    for (size_t i = 0; i < (size_t)T * K; i++) x[i] = random_float();
    for (size_t i = 0; i < (size_t)rows * K; i++) w[i] = random_float();
    for (size_t i = 0; i < (size_t)T * rows; i++) y0[i] = random_float();
    double worst = 0.0; /* against a double-precision sum: the chain is a real product */
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < rows; j++) {
            float acc = 0.0f;
            double exact = 0.0;
            for (int k = 0; k < K; k++) {
                acc = fmaf(x[(size_t)t * K + k], w[(size_t)j * K + k], acc);
                exact += (double)x[(size_t)t * K + k] * w[(size_t)j * K + k];
            }
            chain[(size_t)t * rows + j] = acc;
            worst = fmax(worst, fabs(acc - exact));
        }
    }
    CHECK(worst < 1e-5 * K);

    gemm(kernel, x, T, K, w, rows, y, false);
    int same = memcmp(y, chain, (size_t)T * rows * sizeof(float)) == 0;
    if (!same)
        fprintf(stderr, "kernel %s, T %d, K %d, rows %d: y != fma chain\n", name, T, K, rows);
    CHECK(same);

    if (T <= EM_GEMM_FEW_TOKENS) { /* the weight transposed (K, rows) with a row stride past
                                    * rows; x (K, T) at a column stride of 7; out at stride 5 */
        size_t ldw = (size_t)rows + 5;
        float *wt = malloc((size_t)K * ldw * sizeof(float)),
              *xt = malloc((size_t)K * 7 * sizeof(float)),
              *c = malloc((size_t)rows * 5 * sizeof(float));
        for (int k = 0; k < K; k++) {
            for (size_t j = 0; j < ldw; j++)
                wt[(size_t)k * ldw + j] = j < (size_t)rows ? w[j * K + k] : NAN;
            for (int t = 0; t < 7; t++) xt[(size_t)k * 7 + t] = t < T ? x[(size_t)t * K + k] : NAN;
        }
        em_gemm_few_tokens_transposed_for(kernel)(K, xt, 7, T, wt, ldw, rows, c, 5);
        int transposed = 1;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < rows; j++)
                transposed = transposed && memcmp(&c[5 * j + t], &chain[(size_t)t * rows + j],
                                                  sizeof(float)) == 0;
        if (!transposed)
            fprintf(stderr, "kernel %s, T %d, K %d, rows %d: transposed few-token != fma chain\n",
                    name, T, K, rows);
        CHECK(transposed);
        free(wt);
        free(xt);
        free(c);
    }

    memcpy(y, y0, (size_t)T * rows * sizeof(float));
    gemm(kernel, x, T, K, w, rows, y, true);
    int added = 1;
    for (size_t i = 0; i < (size_t)T * rows; i++) added = added && y[i] == y0[i] + chain[i];
    if (!added) fprintf(stderr, "kernel %s, T %d, K %d, rows %d: y += wrong\n", name, T, K, rows);
    CHECK(added);
    free(x);
    free(w);
    free(y0);
    free(y);
    free(chain);
}

int main(void) {
    const char *kernels[] = {"c", "avx2", "avx512"};
    int ran = 0;
    for (int i = 0; i < 3; i++) {
        setenv("EVALMESH_CPU_KERNEL", kernels[i], 1);
        em_gemm_microkernel *kernel;
        const char *name;
        em_status err = em_gemm_microkernel_select(&kernel, &name);
        if (test_kernel_missing(err, kernels[i])) continue;
        CHECK_STR_EQ(name, kernels[i]);
        /* 1 to 4 tokens: the few-token kernels; past 64 rows: their groups; 5, 16, 33, 70: a
         * kernel call of one panel */
        int tokens[] = {1, 2, 3, 4, 5, 16, 17, 33, 48, 70}, widths[] = {3, 17, 256, 300, 520},
            row_counts[] = {1, 11, 12, 25, 64, 130};
        for (int a = 0; a < 10; a++) {
            for (int b = 0; b < 5; b++) {
                for (int c = 0; c < 6; c++) {
                    check_shape(kernel, name, tokens[a], widths[b], row_counts[c]);
                }
            }
        }
        printf("kernel %s: 300 shapes equal to the fma chain\n", name);
        ran++;
    }
    CHECK(ran >= 1); /* the C kernel always runs */

    setenv("EVALMESH_CPU_KERNEL", "sse9", 1);
    em_gemm_microkernel *kernel;
    const char *name;
    em_status err = em_gemm_microkernel_select(&kernel, &name);
    test_kernel_unknown_refused(err);
    return test_finish();
}
