/* The matrix products of the forward's `bf16` precision: weights and activations rounded to BF16,
 * products accumulated in FP32 in one fixed order that every kernel reproduces bit for bit.
 *
 * Rounding (em_bf16_round): a float goes to the nearest BF16, ties to even, as AVX512-BF16's
 * VCVTNE2PS2BF16 does it: a denormal float becomes a zero of its sign (a normal one never rounds to
 * a BF16 denormal), so no product ever sees a denormal input, which the instructions would treat
 * as zero anyway. Each weight value is rounded from its exact FP32 value (F32, F16,
 * BF16 as they are, quantized types dequantized first) as its tile is converted; each product's
 * activations are rounded once per product (em_bf16_pack_panel).
 *
 * Order: the input columns k = 0 .. K-1 go in pairs (2i, 2i+1), K padded to even with a zero; for
 * each output, from acc = 0, pair by pair in i order,
 *     acc = ftz(fma(x[2i+1], w[2i+1], acc));  acc = ftz(fma(x[2i], w[2i], acc))
 * where ftz turns a denormal result into a zero of its sign: the odd element first. This is what
 * AVX512-BF16's VDPBF16PS does with one BF16 pair per lane (measured on a Xeon with avx512_bf16:
 * 0 differences in 3 million random pairs, including cancellations, the whole exponent range and
 * denormal inputs and outputs; the even-first order differs in 7% of them, one rounding of the
 * whole sum in 18%), and the C kernel computes it with fmaf. AMX-BF16's TDPBF16PS does not
 * follow it: on the same Xeon it computes acc = ftz(acc + ftz(round(p0 + p1))), the pair's two
 * exact products (each below the smallest normal flushed to a zero of its sign) summed with one
 * rounding before they meet the accumulator (0 differences in 3 million pairs without denormal
 * inputs; the documented even-then-odd pair of fused steps differs in 25% of all pairs, 55% of the
 * cancelling ones), so no swap of the pairs makes it give these bits, and it has no row here (nor
 * is one TDPBF16PS over 16 pairs the 16 one-pair steps in k order: 44% of outputs differ, so it
 * sums several pairs at once inside).
 *
 * Storing a float between blocks of k is exact, so the result is the same chain however the
 * caller blocks k, tiles the rows, splits threads or batches windows, and whichever kernel runs.
 *
 * The same chain runs on the FP32 FMA unit: each product of two BF16 values is exact in FP32, so
 * fma(x, w, acc) adds it with the one rounding VDPBF16PS gives it, and with MXCSR's flush-to-zero
 * set a denormal result becomes a zero of its sign as ftz says (tininess after rounding, as
 * VDPBF16PS and the C kernel's ftz of the rounded fmaf: 0 differences in 20 million random steps
 * near the bottom of the normal range on the Xeon, and the step 2^-126 - 2^-151, which rounds up
 * to 2^-126 and is kept by all three). Its operands are the rounded values as floats, each pair's
 * odd value first, so the GEMM's FP32 microkernel, one fma chain in k order, computes the chain.
 *
 * Kernels are rows of a table, tried in order by cpuid: `avx512bf16` (VDPBF16PS), `avx512` (the
 * GEMM's AVX-512 microkernel on the floats), then `c`. On a CPU with AMX-BF16 the best skips
 * avx512bf16: on the Xeon with AMX (Sapphire Rapids class) VDPBF16PS issues about once every two
 * cycles, where two FP32 FMAs issue every cycle, so `avx512` runs the chain faster (square 2048
 * product, 2 threads: 192 against 257 GFLOP/s); on the AMD EPYC (Zen 4) VDPBF16PS is the faster.
 * The environment variable EVALMESH_CPU_KERNEL (avx512bf16, avx512 or c; the GEMM's avx2 and the
 * ggml precision's amx, avx512vnni or avxvnni, which have no row here, take this table's best)
 * forces one. */
#ifndef EVALMESH_KERNELS_BF16_DOT_H
#define EVALMESH_KERNELS_BF16_DOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/error.h"
#include "stages/formats/ggml_types.h"
#include "stages/formats/half.h"
#include "stages/kernels/cpu/gemm.h"

#define EM_BF16_KC 256 /* words per block of k: a block of two panels is 32 KiB */

/* The BF16 bits nearest to x (see above). */
static inline uint16_t em_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0) return (uint16_t)(u >> 16 & 0x8000);        /* zero */
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40); /* NaN */
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16); /* nearest, ties to even */
}
/* The float whose value BF16 bits h hold. */
static inline float em_bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}
/* The pair (2i, 2i+1) of BF16 values lo, hi as one 32-bit word: lo in the low half. */
static inline uint32_t em_bf16_pair(uint16_t lo, uint16_t hi) {
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* Pairs of a row of K values (K padded to even). */
static inline int em_bf16_pairs(int K) {
    return (K + 1) / 2;
}

/* xb is `panels` (1 or 2) panels of EM_GEMM_PANEL tokens, at xb and xb + panel_stride: the pair
 * i of token t of a panel is xb[i * EM_GEMM_PANEL + t] (2 words a pair: its odd value's float at
 * xb[2 i * EM_GEMM_PANEL + t], its even one's at xb[(2 i + 1) * EM_GEMM_PANEL + t]). w[j] points
 * at `pairs` pairs of weight row j. ct is (EM_GEMM_ROWS, EM_GEMM_TOKENS) with row stride ldc: ct[j
 * * ldc + t] = the chain above over the pairs, from 0 (first) or from ct[j * ldc + t], for the
 * panels' tokens (one panel leaves ct's other 16 columns as they are). */
typedef void em_bf16_microkernel(int pairs, const uint32_t *xb, size_t panel_stride, int panels,
                                 const uint32_t *const *w, float *ct, size_t ldc, bool first);

/* One token (a decoding step of one sequence): c[j * ldc] for the rows j < rows of wt (`pairs`
 * pairs each, row stride ldw words) = the chain above over the pairs, from 0, with the token's
 * pair i at x[i * x_stride] (2 words a pair: its two floats at x[2 i * x_stride] and
 * x[(2 i + 1) * x_stride]). The microkernel's chains without its 15 idle token lanes. */
typedef void em_bf16_one_token(int pairs, const uint32_t *x, size_t x_stride, const uint32_t *wt,
                               size_t ldw, int rows, float *c, size_t ldc);

/* A kernel: its microkernel, its one-token product and its own ways to round (the same bits as
 * em_bf16_round): pack_panel as em_bf16_pack_panel, round_rows as em_bf16_round_rows,
 * round_stored_rows as em_bf16_round_stored_rows. Its pairs are words_per_pair 32-bit words each:
 * 1, the two BF16 values in one word (em_bf16_pair), or 2, the two values as floats, the odd one
 * first; "pair i at p[i]" in the layouts here means the words_per_pair words from p[words_per_pair
 * i]. */
typedef struct em_bf16_kernel {
    const char *name;        /* what EVALMESH_CPU_KERNEL names and the forward's log line says */
    bool (*runs_here)(void); /* cpuid: whether this CPU has the instructions */
    /* NULL, or whether a later row is the faster on this CPU (the best passes this one by) */
    bool (*outpaced_here)(void);
    int words_per_pair;
    em_bf16_microkernel *microkernel;
    em_bf16_one_token *one_token;
    void (*pack_panel)(em_gemm_panels x, int K, int panel, int tokens, uint32_t *xb);
    void (*round_rows)(float *wt, size_t ldw, int rows, int K);
    void (*round_stored_rows)(em_tensor_type type, const uint8_t *data, size_t row_bytes, int rows,
                              int K, uint32_t *wt);
} em_bf16_kernel;

/* The plain C kernel: the definition the others match. */
extern const em_bf16_kernel em_bf16_kernel_c;
#if defined(__x86_64__)
extern const em_bf16_kernel em_bf16_kernel_avx512bf16;
extern const em_bf16_kernel em_bf16_kernel_avx512;
#endif

/* The first kernel of the table this CPU runs, or the one EVALMESH_CPU_KERNEL names: an error
 * (exit status 2) when it names an unknown kernel or one this CPU cannot run. */
em_status em_bf16_kernel_select(const em_bf16_kernel **kernel);
/* Whether name is a row of the table (the GEMM's choice takes its best for such a name). */
bool em_bf16_kernel_named(const char *name);

/* uint32 words of x (T, K) rounded and packed by the kernel's pack_panel. */
size_t em_bf16_packed_words(const em_bf16_kernel *kernel, int T, int K);
/* Rounds panel p of x (T, K, as panels of floats, gemm.h) to BF16 pairs into xb (the C kernel's
 * format): pair i of token p * 16 + t at xb[(p * pairs + i) * EM_GEMM_PANEL + t] for t < tokens
 * (the panel's tokens of x), zeros for the others; a kernel of 2 words a pair has the odd value's
 * float at xb[(2 (p * pairs + i)) * EM_GEMM_PANEL + t], the even one's a panel row later. Only
 * those tokens of x are read, so x may be a narrow panel. Panels are independent: threads share
 * them. */
void em_bf16_pack_panel(em_gemm_panels x, int K, int panel, int tokens, uint32_t *xb);
/* Rounds `rows` rows of K floats (row stride ldw) in place to BF16 pairs: row j's pairs start at
 * word j * em_bf16_row_stride(&em_bf16_kernel_c, K) of wt. */
void em_bf16_round_rows(float *wt, size_t ldw, int rows, int K);
/* Words from one row of the kernel's rounded pairs (round_rows, round_stored_rows) to the next: no
 * more than K + EM_GEMM_ROW_PAD, the ldw of the floats round_rows rounds in place. */
size_t em_bf16_row_stride(const em_bf16_kernel *kernel, int K);
/* Whether round_stored_rows reads the type: F16, BF16 and F32 (the others go through floats and
 * round_rows). */
static inline bool em_bf16_reads_stored(em_tensor_type type) {
    return type == EM_TENSOR_F16 || type == EM_TENSOR_BF16 || type == EM_TENSOR_F32;
}
/* Value c of a stored row of such a type as its exact float. */
static inline float em_bf16_stored_value(em_tensor_type type, const uint8_t *row, int c) {
    uint16_t h;
    float f;
    if (type == EM_TENSOR_F32) {
        memcpy(&f, row + 4 * (size_t)c, 4);
        return f;
    }
    memcpy(&h, row + 2 * (size_t)c, 2);
    return type == EM_TENSOR_F16 ? em_f16_to_f32(h) : em_bf16_value(h);
}
/* Rounds `rows` rows of K values of type (em_bf16_reads_stored; row j at data + j * row_bytes) to
 * BF16 pairs, row j's at word j * em_bf16_row_stride(&em_bf16_kernel_c, K) of wt: each value's
 * exact float rounded, the bits of the type's row function then em_bf16_round_rows, with no float
 * written between (a weight's tile, read once from the file). */
void em_bf16_round_stored_rows(em_tensor_type type, const uint8_t *data, size_t row_bytes, int rows,
                               int K, uint32_t *wt);

/* ct (em_gemm_padded_rows(rows), em_gemm_padded_tokens(T)) with row stride ldc = wt x^T in the
 * order above, xb from em_bf16_pack_panel and wt `rows` rows of pairs (row stride ldw words):
 * through the kernel's microkernel, or its one_token when T is 1. Rows past `rows` and tokens past
 * T are to be ignored. */
void em_bf16_tile(const em_bf16_kernel *kernel, const uint32_t *xb, int T, int K,
                  const uint32_t *wt, size_t ldw, int rows, float *ct, size_t ldc);

#endif
