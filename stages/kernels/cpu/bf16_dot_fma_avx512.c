/* The `bf16` precision's FP32-FMA kernel, `avx512` (see bf16_dot.h): the weights and activations
 * rounded to BF16 and kept as floats, each pair's odd value first, so that the GEMM's AVX-512
 * microkernel (and its few-token kernel for one token), one fma chain per output in k order, adds
 * the odd product and then the even one with one rounding each; MXCSR's flush-to-zero, set around
 * each call, flushes denormal results as the chain says. Each product of two BF16 values is exact
 * in FP32, so these are the C kernel's and VDPBF16PS's bits at the FP32 FMA rate. The roundings
 * are em_bf16_round's, written with AVX-512F integer operations (no AVX512-BF16 needed). */
#include "stages/kernels/cpu/bf16_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "stages/kernels/cpu/bf16_stored_avx512.h"
#include "stages/kernels/cpu/gemm_microkernel.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

/* 16 floats rounded as em_bf16_round rounds them, as the floats they become: a denormal or zero
 * to a zero of its sign, a NaN kept quiet, the others to nearest, ties to even. */
AVX512 static inline __m512 round16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r =
        _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))),
                         _mm512_set1_epi32((int)0xffff0000u));
    __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_and_epi32(r, tiny, u, _mm512_set1_epi32((int)0x80000000u));
    r = _mm512_mask_and_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)),
                              _mm512_set1_epi32((int)0xffff0000u));
    return _mm512_castsi512_ps(r);
}

/* 16 values in pair order (even, odd, even, ...), rounded, as the chain takes them: each pair's
 * odd value first. */
AVX512 static inline __m512 round_pairs(__m512 v) {
    return _mm512_permute_ps(round16(v), 0xB1); /* lanes 1, 0, 3, 2 of each 4 */
}

/* The calls below with flush-to-zero set: each chain's denormal results become zeros of their
 * sign. The kernel runs through a call, which the compiler does not move across the MXCSR writes.
 */
AVX512 static void microkernel(int pairs, const uint32_t *xb, size_t panel_stride, int panels,
                               const uint32_t *const *w, float *ct, size_t ldc, bool first) {
    const float *rows[EM_GEMM_ROWS];
    for (int j = 0; j < EM_GEMM_ROWS; j++) rows[j] = (const float *)w[j];
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | _MM_FLUSH_ZERO_ON);
    em_gemm_microkernel_avx512()(2 * pairs, (const float *)xb, EM_GEMM_PANEL, panel_stride, panels,
                                 rows, ct, ldc, first);
    _mm_setcsr(csr);
}

AVX512 static void one_token(int pairs, const uint32_t *x, size_t x_stride, const uint32_t *wt,
                             size_t ldw, int rows, float *c, size_t ldc) {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | _MM_FLUSH_ZERO_ON);
    em_gemm_few_tokens_for(em_gemm_microkernel_avx512())(2 * pairs, (const float *)x, x_stride, 1,
                                                         (const float *)wt, ldw, rows, c, ldc);
    _mm_setcsr(csr);
}

/* Pair i of the panel's tokens: the odd column's 16 floats rounded (zeros past K), then the even
 * column's. */
AVX512 static void pack_panel(em_gemm_panels x, int K, int panel, int tokens, uint32_t *xb) {
    int pairs = em_bf16_pairs(K);
    const float *in = x.x + (tokens ? (size_t)panel * x.panel_stride : 0); /* 0: reads none */
    float *out = (float *)xb + (size_t)panel * 2 * pairs * EM_GEMM_PANEL;
    const __mmask16 live = (__mmask16)((1u << tokens) - 1); /* the panel's tokens of x */
    for (int i = 0; i < pairs; i++) {
        const float *even = in + (size_t)(2 * i) * x.column_stride;
        __m512 odd = 2 * i + 1 < K ? _mm512_maskz_loadu_ps(live, even + x.column_stride)
                                   : _mm512_setzero_ps();
        _mm512_storeu_ps(out + (size_t)(2 * i) * EM_GEMM_PANEL, round16(odd));
        _mm512_storeu_ps(out + (size_t)(2 * i + 1) * EM_GEMM_PANEL,
                         round16(_mm512_maskz_loadu_ps(live, even)));
    }
}

/* The mask of the values below n of a 16-value step at c (none past it). */
static inline __mmask16 below(int n, int c) {
    return n - c >= 16 ? 0xffff : n > c ? (__mmask16)((1u << (n - c)) - 1) : 0;
}

/* Row j's 2 pairs values at word j * stride: 16 values a step, each block loaded before it is
 * stored at or before where it was (stride <= ldw), so in place is safe. */
AVX512 static void round_rows(float *wt, size_t ldw, int rows, int K) {
    size_t stride = em_bf16_row_stride(&em_bf16_kernel_avx512, K);
    int values = 2 * em_bf16_pairs(K); /* K and the odd K's zero */
    for (int j = 0; j < rows; j++) {
        const float *row = wt + (size_t)j * ldw;
        float *dst = wt + (size_t)j * stride;
        for (int c = 0; c < values; c += 16) {
            __m512 v = round_pairs(_mm512_maskz_loadu_ps(below(K, c), row + c));
            _mm512_mask_storeu_ps(dst + c, below(values, c), v);
        }
    }
}

AVX512 static void round_stored_rows(em_tensor_type type, const uint8_t *data, size_t row_bytes,
                                     int rows, int K, uint32_t *wt) {
    size_t stride = em_bf16_row_stride(&em_bf16_kernel_avx512, K);
    int values = 2 * em_bf16_pairs(K);
    for (int j = 0; j < rows; j++) {
        const uint8_t *row = data + (size_t)j * row_bytes;
        float *dst = (float *)wt + (size_t)j * stride;
        for (int c = 0; c < values; c += 16) {
            __m512 v = em_bf16_stored16(type, row, c, below(K, c));
            _mm512_mask_storeu_ps(dst + c, below(values, c), round_pairs(v));
        }
    }
}

static bool runs_here(void) {
    return em_gemm_microkernel_avx512() && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
}

const em_bf16_kernel em_bf16_kernel_avx512 = {
    .name = "avx512",
    .runs_here = runs_here,
    .words_per_pair = 2,
    .microkernel = microkernel,
    .one_token = one_token,
    .pack_panel = pack_panel,
    .round_rows = round_rows,
    .round_stored_rows = round_stored_rows,
};
#endif
