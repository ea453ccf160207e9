/* The `bf16` precision's rounding, packing, blocking, plain C kernel, the kernel table and the
 * choice between its rows (see bf16_dot.h). */
#include "stages/kernels/cpu/bf16_dot.h"

#include "stages/formats/dequantize_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A denormal result as a zero of its sign (the instructions' output flush). */
static float ftz(float x) {
    return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x;
}

/* The chain's step for one pair: the odd products, then the even ones. */
static float pair_step(float acc, uint32_t xi, uint32_t wi) {
    acc = ftz(fmaf(em_bf16_value((uint16_t)(xi >> 16)), em_bf16_value((uint16_t)(wi >> 16)), acc));
    return ftz(fmaf(em_bf16_value((uint16_t)xi), em_bf16_value((uint16_t)wi), acc));
}

static void microkernel_c(int pairs, const uint32_t *xb, size_t panel_stride, int panels,
                          const uint32_t *const *w, float *ct, size_t ldc, bool first) {
    for (int j = 0; j < EM_GEMM_ROWS; j++) {
        for (int t = 0; t < panels * EM_GEMM_PANEL; t++) {
            const uint32_t *x = xb + (size_t)(t / EM_GEMM_PANEL) * panel_stride + t % EM_GEMM_PANEL;
            float acc = first ? 0.0f : ct[j * ldc + t];
            for (int i = 0; i < pairs; i++)
                acc = pair_step(acc, x[(size_t)i * EM_GEMM_PANEL], w[j][i]);
            ct[j * ldc + t] = acc;
        }
    }
}

static void one_token_c(int pairs, const uint32_t *x, size_t x_stride, const uint32_t *wt,
                        size_t ldw, int rows, float *c, size_t ldc) {
    for (int j = 0; j < rows; j++) {
        float acc = 0.0f;
        for (int i = 0; i < pairs; i++)
            acc = pair_step(acc, x[(size_t)i * x_stride], wt[j * ldw + i]);
        c[(size_t)j * ldc] = acc;
    }
}

static bool always(void) {
    return true;
}

const em_bf16_kernel em_bf16_kernel_c = {
    .name = "c",
    .runs_here = always,
    .words_per_pair = 1,
    .microkernel = microkernel_c,
    .one_token = one_token_c,
    .pack_panel = em_bf16_pack_panel,
    .round_rows = em_bf16_round_rows,
    .round_stored_rows = em_bf16_round_stored_rows,
};

/* The table, best first. */
static const em_bf16_kernel *const kernels[] = {
#if defined(__x86_64__)
    &em_bf16_kernel_avx512bf16,
    &em_bf16_kernel_avx512,
#endif
    &em_bf16_kernel_c,
};
#define KERNELS (sizeof kernels / sizeof *kernels)

bool em_bf16_kernel_named(const char *name) {
    for (size_t i = 0; i < KERNELS; i++)
        if (strcmp(name, kernels[i]->name) == 0) return true;
    return false;
}

em_status em_bf16_kernel_select(const em_bf16_kernel **kernel) {
    const char *wanted = getenv("EVALMESH_CPU_KERNEL");
    /* unset, or the GEMM's and the ggml precision's names that have no row here: the best */
    bool best = !wanted || !*wanted || strcmp(wanted, "avx2") == 0 ||
                strcmp(wanted, "avx512vnni") == 0 || strcmp(wanted, "avxvnni") == 0 ||
                strcmp(wanted, "amx") == 0;
    *kernel = NULL;
    for (size_t i = 0; i < KERNELS; i++) {
        if (best && kernels[i]->outpaced_here && kernels[i]->outpaced_here()) continue;
        if (kernels[i]->runs_here() && (best || strcmp(wanted, kernels[i]->name) == 0)) {
            *kernel = kernels[i];
            return NULL;
        }
    }
    if (em_bf16_kernel_named(wanted))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "EVALMESH_CPU_KERNEL=%s, but this CPU cannot run that kernel", wanted);
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "EVALMESH_CPU_KERNEL=%s is not a CPU kernel (" EM_CPU_KERNEL_NAMES ")",
                        wanted);
}

size_t em_bf16_packed_words(const em_bf16_kernel *kernel, int T, int K) {
    return (size_t)em_gemm_padded_tokens(T) * (size_t)em_bf16_pairs(K) *
           (size_t)kernel->words_per_pair;
}

void em_bf16_pack_panel(em_gemm_panels x, int K, int panel, int tokens, uint32_t *xb) {
    int pairs = em_bf16_pairs(K);
    const float *in = x.x + (tokens ? (size_t)panel * x.panel_stride : 0); /* 0: reads none */
    uint32_t *out = xb + (size_t)panel * pairs * EM_GEMM_PANEL; /* (pairs, EM_GEMM_PANEL) */
    for (int i = 0; i < pairs; i++) {
        const float *lo = in + (size_t)(2 * i) * x.column_stride;
        for (int t = 0; t < EM_GEMM_PANEL; t++) {
            uint16_t hi = t < tokens && 2 * i + 1 < K ? em_bf16_round(lo[x.column_stride + t]) : 0;
            uint16_t low = t < tokens ? em_bf16_round(lo[t]) : 0;
            out[(size_t)i * EM_GEMM_PANEL + t] = em_bf16_pair(low, hi);
        }
    }
}

size_t em_bf16_row_stride(const em_bf16_kernel *kernel, int K) {
    /* a half cache line past the pairs: rows not all in the same cache sets */
    return (size_t)em_bf16_pairs(K) * (size_t)kernel->words_per_pair + 8;
}

void em_bf16_round_rows(float *wt, size_t ldw, int rows, int K) {
    /* in place: pair i of row j goes to word j * stride + i, at or before the floats 2i, 2i+1 of
     * row j it is made from (stride <= ldw), after every float it overwrites has been read */
    size_t stride = em_bf16_row_stride(&em_bf16_kernel_c, K);
    unsigned char *bytes = (unsigned char *)wt;
    for (int j = 0; j < rows; j++) {
        const float *row = wt + (size_t)j * ldw;
        for (int i = 0; i < em_bf16_pairs(K); i++) {
            uint16_t lo = em_bf16_round(row[2 * i]);
            uint16_t hi = 2 * i + 1 < K ? em_bf16_round(row[2 * i + 1]) : 0;
            uint32_t pair = em_bf16_pair(lo, hi);
            memcpy(bytes + ((size_t)j * stride + (size_t)i) * 4, &pair, 4);
        }
    }
}

void em_bf16_round_stored_rows(em_tensor_type type, const uint8_t *data, size_t row_bytes, int rows,
                               int K, uint32_t *wt) {
    size_t stride = em_bf16_row_stride(&em_bf16_kernel_c, K);
    for (int j = 0; j < rows; j++) {
        const uint8_t *row = data + (size_t)j * row_bytes;
        for (int i = 0; i < em_bf16_pairs(K); i++) {
            uint16_t lo = em_bf16_round(em_bf16_stored_value(type, row, 2 * i));
            uint16_t hi =
                2 * i + 1 < K ? em_bf16_round(em_bf16_stored_value(type, row, 2 * i + 1)) : 0;
            wt[(size_t)j * stride + (size_t)i] = em_bf16_pair(lo, hi);
        }
    }
}

void em_bf16_tile(const em_bf16_kernel *kernel, const uint32_t *xb, int T, int K,
                  const uint32_t *wt, size_t ldw, int rows, float *ct, size_t ldc) {
    static const uint32_t zeros[EM_BF16_KC]; /* stands in for the rows past `rows` */
    int pairs = em_bf16_pairs(K), words = kernel->words_per_pair, block = EM_BF16_KC / words;
    if (T == 1) { /* the packed panel's token 0 */
        kernel->one_token(pairs, xb, EM_GEMM_PANEL, wt, ldw, rows, ct, ldc);
        return;
    }
    size_t panel_stride = (size_t)pairs * (size_t)words * EM_GEMM_PANEL;
    for (int i0 = 0; i0 < pairs; i0 += block) {
        int kc = pairs - i0 < block ? pairs - i0 : block;
        size_t at = (size_t)i0 * (size_t)words; /* the block's first word of a row */
        for (int t0 = 0; t0 < em_gemm_padded_tokens(T); t0 += EM_GEMM_TOKENS) {
            const uint32_t *x =
                xb + (size_t)(t0 / EM_GEMM_PANEL) * panel_stride + at * EM_GEMM_PANEL;
            int panels = T - t0 > EM_GEMM_PANEL ? 2 : 1; /* a panel of padding only is skipped */
            for (int j0 = 0; j0 < rows; j0 += EM_GEMM_ROWS) {
                const uint32_t *w[EM_GEMM_ROWS];
                for (int r = 0; r < EM_GEMM_ROWS; r++)
                    w[r] = j0 + r < rows ? wt + (size_t)(j0 + r) * ldw + at : zeros;
                kernel->microkernel(kc, x, panel_stride, panels, w, ct + (size_t)j0 * ldc + t0, ldc,
                                    i0 == 0);
            }
        }
    }
}
