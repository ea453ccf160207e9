/* The 8-bit rounding of q8_activations.h on AVX-512: one block of 16 tokens (a GEMM panel) at
 * once, each vector lane a token, every step the scalar one's IEEE operation (max of |x|, the
 * divisions, x * id, roundf's halves away from zero, ggml's nearest_int's halves to even), so the
 * bits are the C rounding's (tests/kernels/test_q8_activations.c). */
#include "stages/kernels/cpu/q8_activations.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "stages/formats/half.h"

#define AVX512 __attribute__((target("avx512f,avx512bw")))

bool em_q8_avx512_runs_here(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

static float f16_round(float f) {
    return em_f16_to_f32(em_f32_to_f16(f));
}

/* roundf of each lane: truncate, then one away from zero where the dropped part is >= 0.5 (exact:
 * |y| <= 127 here, so y - trunc(y) has no rounding) */
AVX512 static __m512 round_half_away(__m512 y) {
    __m512 t = _mm512_roundscale_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 dropped = _mm512_abs_ps(_mm512_sub_ps(y, t));
    __mmask16 up = _mm512_cmp_ps_mask(dropped, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512 one = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(INT32_MIN)),
                        _mm512_castps_si512(_mm512_set1_ps(1.0f))));
    return _mm512_mask_add_ps(t, up, t, one);
}

AVX512 void em_q8_block_panel_avx512(em_gemm_panels x, int panel, int n, int b,
                                     em_q8_activations *q) {
    /* v[j * column_stride + lane]: value j of the block for token panel * 16 + lane */
    const float *v =
        x.x + (size_t)panel * x.panel_stride + (size_t)b * EM_Q8_BLOCK * x.column_stride;
    const __mmask16 live = (__mmask16)((1u << n) - 1); /* lanes past n read nothing: zeros */
    __m512 amax = _mm512_setzero_ps();
    for (int j = 0; j < EM_Q8_BLOCK; j++)
        amax = _mm512_max_ps(
            amax, _mm512_abs_ps(_mm512_maskz_loadu_ps(live, v + (size_t)j * x.column_stride)));
    __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    __mmask16 nonzero = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    __m512 id = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), d);
    __m512i sum = _mm512_setzero_si512();
    int8_t columns[EM_Q8_BLOCK][EM_GEMM_PANEL]; /* (value, token) */
    for (int j = 0; j < EM_Q8_BLOCK; j++) {
        __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(live, v + (size_t)j * x.column_stride), id);
        __m512i qi = _mm512_cvttps_epi32(round_half_away(y));
        sum = _mm512_add_epi32(sum, qi);
        _mm_storeu_si128((__m128i *)columns[j], _mm512_cvtepi32_epi8(qi));
    }
    float ds[EM_GEMM_PANEL];
    int32_t sums[EM_GEMM_PANEL];
    _mm512_storeu_ps(ds, d);
    _mm512_storeu_si512(sums, sum);
    for (int t = 0; t < n; t++) {
        size_t at = (size_t)b * q->tokens + (size_t)panel * EM_GEMM_PANEL + t;
        int8_t *qs = q->qs + at * EM_Q8_BLOCK;
        for (int j = 0; j < EM_Q8_BLOCK; j++) qs[j] = columns[j][t];
        q->d[at] = f16_round(ds[t]);
        q->s[at] = f16_round((float)sums[t] * ds[t]);
        q->sum[at] = sums[t];
    }
}

AVX512 void em_q8_block_token_avx512(em_gemm_panels x, int t, int b, em_q8_activations *q) {
    const float *v = x.x + (size_t)(t / EM_GEMM_PANEL) * x.panel_stride +
                     (size_t)b * EM_Q8_BLOCK * x.column_stride + t % EM_GEMM_PANEL;
    float values[EM_Q8_BLOCK]; /* the token's block, gathered from its column stride */
    for (int j = 0; j < EM_Q8_BLOCK; j++) values[j] = v[(size_t)j * x.column_stride];
    __m512 lo = _mm512_loadu_ps(values), hi = _mm512_loadu_ps(values + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    __m512i qlo = _mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(lo, _mm512_set1_ps(id))));
    __m512i qhi = _mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(hi, _mm512_set1_ps(id))));
    size_t at = (size_t)b * q->tokens + t;
    int8_t *qs = q->qs + at * EM_Q8_BLOCK;
    _mm_storeu_si128((__m128i *)qs, _mm512_cvtepi32_epi8(qlo));
    _mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtepi32_epi8(qhi));
    int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
    q->d[at] = f16_round(d);
    q->s[at] = f16_round((float)sum * d);
    q->sum[at] = sum;
}

/* col[k] = byte k of each of the 16 rows (a 16 x 16 byte transpose: pairs, then quads, eights and
 * sixteens of rows side by side). */
AVX512 static void transpose_bytes(const int8_t rows[16][EM_GEMM_PANEL], __m128i col[16]) {
    __m128i r[16], t[16], u[16], v[16];
    for (int i = 0; i < 16; i++) r[i] = _mm_loadu_si128((const __m128i *)rows[i]);
    for (int i = 0; i < 8; i++) { /* t[2 i]: bytes 0..7 of rows 2 i, 2 i + 1; t[2 i + 1]: 8..15 */
        t[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* u[4 i + m]: bytes 4 m .. 4 m + 3 of rows 4 i .. 4 i + 3 */
        u[4 * i] = _mm_unpacklo_epi16(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm_unpackhi_epi16(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm_unpacklo_epi16(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm_unpackhi_epi16(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 2; i++) /* v[8 i + n]: bytes 2 n, 2 n + 1 of rows 8 i .. 8 i + 7 */
        for (int m = 0; m < 4; m++) {
            v[8 * i + 2 * m] = _mm_unpacklo_epi32(u[8 * i + m], u[8 * i + 4 + m]);
            v[8 * i + 2 * m + 1] = _mm_unpackhi_epi32(u[8 * i + m], u[8 * i + 4 + m]);
        }
    for (int n = 0; n < 8; n++) {
        col[2 * n] = _mm_unpacklo_epi64(v[n], v[8 + n]);
        col[2 * n + 1] = _mm_unpackhi_epi64(v[n], v[8 + n]);
    }
}

AVX512 void em_q8k_block_panel_avx512(em_gemm_panels x, int panel, int n, int b,
                                      em_q8_activations *q) {
    const float *v =
        x.x + (size_t)panel * x.panel_stride + (size_t)b * EM_Q8K_BLOCK * x.column_stride;
    /* the value of largest |x| per token, the first of equals */
    const __mmask16 live = (__mmask16)((1u << n) - 1); /* lanes past n read nothing: zeros */
    __m512 amax = _mm512_setzero_ps(), max = _mm512_setzero_ps();
    for (int j = 0; j < EM_Q8K_BLOCK; j++) {
        __m512 value = _mm512_maskz_loadu_ps(live, v + (size_t)j * x.column_stride);
        __m512 a = _mm512_abs_ps(value);
        __mmask16 larger = _mm512_cmp_ps_mask(a, amax, _CMP_GE_OQ);
        amax = _mm512_mask_mov_ps(amax, larger, a);
        max = _mm512_mask_mov_ps(max, larger, value);
    }
    __mmask16 nonzero = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    __m512 iscale = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(-127.f), max);
    int8_t columns[EM_Q8K_BLOCK][EM_GEMM_PANEL]; /* (value, token) */
    int32_t group_sums[16][EM_GEMM_PANEL];
    for (int g = 0; g < 16; g++) {
        __m512i sum = _mm512_setzero_si512();
        for (int j = 16 * g; j < 16 * g + 16; j++) {
            __m512 y =
                _mm512_mul_ps(iscale, _mm512_maskz_loadu_ps(live, v + (size_t)j * x.column_stride));
            __m512i qi = _mm512_cvtps_epi32(
                _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            qi = _mm512_min_epi32(qi, _mm512_set1_epi32(127));
            sum = _mm512_add_epi32(sum, qi);
            _mm_storeu_si128((__m128i *)columns[j], _mm512_cvtepi32_epi8(qi));
        }
        _mm512_storeu_si512(group_sums[g], sum);
    }
    __m128i by_token[16][EM_GEMM_PANEL]; /* group g's 16 quants of token t */
    for (int g = 0; g < 16; g++) transpose_bytes(columns + 16 * g, by_token[g]);
    float iscales[EM_GEMM_PANEL];
    _mm512_storeu_ps(iscales, iscale);
    for (int t = 0; t < n; t++) {
        size_t at = (size_t)b * q->tokens + (size_t)panel * EM_GEMM_PANEL + t;
        int8_t *qs = q->kqs + at * EM_Q8K_BLOCK;
        int16_t *bsums = q->kbsums + at * 16;
        if (!((nonzero >> t) & 1)) { /* all zero: so are its quants, sums and scale */
            memset(qs, 0, EM_Q8K_BLOCK);
            memset(bsums, 0, 16 * sizeof *bsums);
            q->kd[at] = 0.0f;
            continue;
        }
        for (int g = 0; g < 16; g++) {
            _mm_storeu_si128((__m128i *)(qs + 16 * g), _mm_load_si128(&by_token[g][t]));
            bsums[g] = (int16_t)group_sums[g][t];
        }
        q->kd[at] = 1 / iscales[t];
    }
}
#else
/* no x86-64: the C rounding only (em_q8_quantize_as is never asked for the vector one) */
bool em_q8_avx512_runs_here(void) {
    return false;
}
void em_q8_block_panel_avx512(em_gemm_panels x, int panel, int n, int b, em_q8_activations *q) {
    (void)x, (void)panel, (void)n, (void)b, (void)q;
}
void em_q8_block_token_avx512(em_gemm_panels x, int t, int b, em_q8_activations *q) {
    (void)x, (void)t, (void)b, (void)q;
}
void em_q8k_block_panel_avx512(em_gemm_panels x, int panel, int n, int b, em_q8_activations *q) {
    (void)x, (void)panel, (void)n, (void)b, (void)q;
}
#endif
