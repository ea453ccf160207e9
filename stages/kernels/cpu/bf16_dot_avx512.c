/* The `bf16` precision's AVX512-BF16 kernel (see bf16_dot.h): 12 weight rows x 2 panels of 16
 * tokens in 24 zmm accumulators (one panel: 12), a lane per token. Per pair of columns, two panel
 * loads (16 tokens' pairs each) and 12 broadcasts of a row's pair feed 24 VDPBF16PS, each of which
 * adds the lane's odd product and then its even product with one rounding each, denormals flushed:
 * the C kernel's chain. One token (one_token) takes 16 weight rows across the lanes instead, the
 * same VDPBF16PS with the token's pair broadcast. The roundings to BF16 are VCVTNE2PS2BF16's,
 * em_bf16_round's bits. */
#include "stages/kernels/cpu/bf16_dot.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "stages/kernels/cpu/bf16_stored_avx512.h"
#include "stages/kernels/cpu/transpose16_avx512.h"

#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* P panels (a constant where it is inlined): 12 P accumulators, P panel loads per pair. */
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline void
microkernel_p(int P, int pairs, const uint32_t *xb, size_t panel_stride, const uint32_t *const *w,
              float *ct, size_t ldc, bool first) {
    __m512 acc[EM_GEMM_ROWS][2];
#pragma GCC unroll 12
    for (int j = 0; j < EM_GEMM_ROWS; j++)
#pragma GCC unroll 2
        for (int p = 0; p < P; p++)
            acc[j][p] =
                first ? _mm512_setzero_ps() : _mm512_loadu_ps(ct + j * ldc + p * EM_GEMM_PANEL);
    for (int i = 0; i < pairs; i++) {
        __m512bh x[2];
#pragma GCC unroll 2
        for (int p = 0; p < P; p++)
            x[p] = (__m512bh)_mm512_loadu_si512(xb + p * panel_stride + (size_t)i * EM_GEMM_PANEL);
#pragma GCC unroll 12
        for (int j = 0; j < EM_GEMM_ROWS; j++) {
            __m512bh wi = (__m512bh)_mm512_set1_epi32((int)w[j][i]);
#pragma GCC unroll 2
            for (int p = 0; p < P; p++) acc[j][p] = _mm512_dpbf16_ps(acc[j][p], x[p], wi);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < EM_GEMM_ROWS; j++)
#pragma GCC unroll 2
        for (int p = 0; p < P; p++) _mm512_storeu_ps(ct + j * ldc + p * EM_GEMM_PANEL, acc[j][p]);
}

AVX512BF16 static void microkernel(int pairs, const uint32_t *xb, size_t panel_stride, int panels,
                                   const uint32_t *const *w, float *ct, size_t ldc, bool first) {
    if (panels == 1)
        microkernel_p(1, pairs, xb, panel_stride, w, ct, ldc, first);
    else
        microkernel_p(2, pairs, xb, panel_stride, w, ct, ldc, first);
}

/* one_token for G groups of 16 rows (rows <= 16 G), a row per lane: per 16 pairs, the 16 rows'
 * pairs of a group transposed in registers so that pair i of the 16 rows is one vector, met by the
 * token's pair i broadcast in one VDPBF16PS: the microkernel's step with the lanes' roles
 * exchanged, so the same chain. G independent chains keep the units busy. */
AVX512BF16 static inline __attribute__((always_inline)) void
one_token_groups(int G, int pairs, const uint32_t *x, size_t x_stride, const uint32_t *wt,
                 size_t ldw, int rows, float *c, size_t ldc) {
    const uint32_t *row[4][16];
    for (int g = 0; g < G; g++)
        for (int r = 0; r < 16; r++)
            row[g][r] = wt + (size_t)(16 * g + r < rows ? 16 * g + r : rows - 1) * ldw;
    __m512 acc[4];
    for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();
    for (int i0 = 0; i0 < pairs; i0 += 16) {
        int n = pairs - i0 < 16 ? pairs - i0 : 16;
        __mmask16 live = (__mmask16)((1u << n) - 1u);
        for (int g = 0; g < G; g++) {
            __m512 v[16];
            for (int r = 0; r < 16; r++)
                v[r] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(live, row[g][r] + i0));
            em_transpose16_avx512(v);
            if (n == 16) { /* v indexed by constants: it stays in registers */
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++)
                    acc[g] = _mm512_dpbf16_ps(
                        acc[g], (__m512bh)_mm512_castps_si512(v[i]),
                        (__m512bh)_mm512_set1_epi32((int)x[(size_t)(i0 + i) * x_stride]));
            } else { /* the last pairs: v through memory */
                uint32_t tail[16][16];
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) _mm512_storeu_ps(tail[i], v[i]);
                for (int i = 0; i < n; i++)
                    acc[g] = _mm512_dpbf16_ps(
                        acc[g], (__m512bh)_mm512_loadu_si512(tail[i]),
                        (__m512bh)_mm512_set1_epi32((int)x[(size_t)(i0 + i) * x_stride]));
            }
        }
    }
    for (int g = 0; g < G; g++) {
        float sums[16];
        _mm512_storeu_ps(sums, acc[g]);
        for (int r = 0; r < 16 && 16 * g + r < rows; r++) c[(size_t)(16 * g + r) * ldc] = sums[r];
    }
}

/* The rows in passes of up to 4 groups of 16. */
AVX512BF16 static void one_token(int pairs, const uint32_t *x, size_t x_stride, const uint32_t *wt,
                                 size_t ldw, int rows, float *c, size_t ldc) {
    for (int r0 = 0; r0 < rows; r0 += 64) {
        int n = rows - r0 < 64 ? rows - r0 : 64, G = (n + 15) / 16;
        const uint32_t *wg = wt + (size_t)r0 * ldw;
        float *cg = c + (size_t)r0 * ldc;
        if (G == 4)
            one_token_groups(4, pairs, x, x_stride, wg, ldw, n, cg, ldc);
        else if (G == 3)
            one_token_groups(3, pairs, x, x_stride, wg, ldw, n, cg, ldc);
        else if (G == 2)
            one_token_groups(2, pairs, x, x_stride, wg, ldw, n, cg, ldc);
        else
            one_token_groups(1, pairs, x, x_stride, wg, ldw, n, cg, ldc);
    }
}

/* em_bf16_pack_panel: per pair, the two columns' 16 tokens rounded, then interleaved. */
AVX512BF16 static void pack_panel(em_gemm_panels x, int K, int panel, int tokens, uint32_t *xb) {
    int pairs = em_bf16_pairs(K);
    const float *in = x.x + (tokens ? (size_t)panel * x.panel_stride : 0); /* 0: reads none */
    uint32_t *out = xb + (size_t)panel * pairs * EM_GEMM_PANEL; /* (pairs, EM_GEMM_PANEL) */
    /* word 2t of the result takes token t of the even column, word 2t + 1 that of the odd one */
    const __m512i interleave =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __mmask16 live = (__mmask16)((1u << tokens) - 1); /* the panel's tokens of x */
    for (int i = 0; i < pairs; i++) {
        const float *lo = in + (size_t)(2 * i) * x.column_stride;
        __m512 even = _mm512_maskz_loadu_ps(live, lo);
        __m512 odd =
            2 * i + 1 < K ? _mm512_maskz_loadu_ps(live, lo + x.column_stride) : _mm512_setzero_ps();
        __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even); /* even's 16, then odd's */
        _mm512_storeu_si512(out + (size_t)i * EM_GEMM_PANEL,
                            _mm512_permutexvar_epi16(interleave, both));
    }
}

/* The masks of a row's 32-value step from column c, the row K values padded to `values` (even):
 * its two 16-value loads' (the values below K) and its store's (the values below `values`). */
typedef struct step_masks {
    __mmask16 lo, hi;
    __mmask32 store;
} step_masks;

static inline step_masks step_masks_at(int K, int values, int c) {
    int left = K - c, out = values - c < 32 ? values - c : 32;
    step_masks m;
    m.lo = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
    m.hi = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
    m.store = out == 32 ? 0xffffffffu : (__mmask32)((1u << out) - 1);
    return m;
}

/* em_bf16_round_rows, 32 values at a time: a row's BF16 values in order are its pairs. In place,
 * as there: each block is stored at or before the floats it was loaded from. */
AVX512BF16 static void round_rows(float *wt, size_t ldw, int rows, int K) {
    size_t stride = em_bf16_row_stride(&em_bf16_kernel_avx512bf16, K) * 2; /* in BF16 values */
    int values = 2 * em_bf16_pairs(K); /* K and the odd K's zero */
    for (int j = 0; j < rows; j++) {
        const float *row = wt + (size_t)j * ldw;
        uint16_t *dst = (uint16_t *)wt + (size_t)j * stride;
        for (int c = 0; c < values; c += 32) {
            step_masks m = step_masks_at(K, values, c);
            __m512 a = _mm512_maskz_loadu_ps(m.lo, row + c);
            __m512 b = _mm512_maskz_loadu_ps(m.hi, row + c + 16);
            _mm512_mask_storeu_epi16(dst + c, m.store, (__m512i)_mm512_cvtne2ps_pbh(b, a));
        }
    }
}

/* em_bf16_round_stored_rows, 32 values at a time: each 16 values' exact floats
 * (em_bf16_stored16), then rounded as round_rows rounds. */
AVX512BF16 static void round_stored_rows(em_tensor_type type, const uint8_t *data, size_t row_bytes,
                                         int rows, int K, uint32_t *wt) {
    size_t stride = em_bf16_row_stride(&em_bf16_kernel_avx512bf16, K) * 2; /* in BF16 values */
    int values = 2 * em_bf16_pairs(K); /* K and the odd K's zero */
    for (int j = 0; j < rows; j++) {
        const uint8_t *row = data + (size_t)j * row_bytes;
        uint16_t *dst = (uint16_t *)wt + (size_t)j * stride;
        for (int c = 0; c < values; c += 32) {
            step_masks m = step_masks_at(K, values, c);
            __m512 a = em_bf16_stored16(type, row, c, m.lo);
            __m512 b = em_bf16_stored16(type, row, c + 16, m.hi);
            _mm512_mask_storeu_epi16(dst + c, m.store, (__m512i)_mm512_cvtne2ps_pbh(b, a));
        }
    }
}

static bool runs_here(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

/* VDPBF16PS at half the FP32 FMA rate: the Xeon with AMX (see bf16_dot.h). */
static bool outpaced_here(void) {
    return __builtin_cpu_supports("amx-bf16");
}

const em_bf16_kernel em_bf16_kernel_avx512bf16 = {
    .name = "avx512bf16",
    .runs_here = runs_here,
    .outpaced_here = outpaced_here,
    .words_per_pair = 1,
    .microkernel = microkernel,
    .one_token = one_token,
    .pack_panel = pack_panel,
    .round_rows = round_rows,
    .round_stored_rows = round_stored_rows,
};
#endif
