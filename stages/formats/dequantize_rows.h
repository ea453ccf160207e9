/* The row functions of the tensor-type table (ggml_types.c), one per type that evalmesh computes
 * with; each turns n values (whole blocks) of its type into floats exactly as ggml's
 * dequantize_row_* does (see ggml_types.h). Block layouts are described where each is defined:
 *   dequantize_plain.c   F32, F16, BF16
 *   dequantize_q.c       blocks of 32: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL
 *   dequantize_fp4.c     MXFP4, NVFP4
 *   dequantize_k.c       super-blocks of 256: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS
 *   dequantize_iq.c      lattice types: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M
 *   dequantize_ternary.c TQ1_0, TQ2_0
 *   dequantize_avx2.c    AVX2 versions of Q4_0, Q4_1, IQ4_NL, IQ4_XS, Q6_K */
#ifndef EVALMESH_DEQUANTIZE_ROWS_H
#define EVALMESH_DEQUANTIZE_ROWS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "stages/formats/ggml_types.h"
#include "stages/formats/half.h"

em_ggml_row_fn em_f32_row, em_f16_row, em_bf16_row;
em_ggml_row_fn em_q4_0_row, em_q4_1_row, em_q5_0_row, em_q5_1_row, em_q8_0_row, em_iq4_nl_row;
em_ggml_row_fn em_mxfp4_row, em_nvfp4_row;
em_ggml_row_fn em_q2_k_row, em_q3_k_row, em_q4_k_row, em_q5_k_row, em_q6_k_row, em_iq4_xs_row;
em_ggml_row_fn em_iq2_xxs_row, em_iq2_xs_row, em_iq2_s_row, em_iq3_xxs_row, em_iq3_s_row,
    em_iq1_s_row, em_iq1_m_row;
em_ggml_row_fn em_tq1_0_row, em_tq2_0_row;
/* dequantize_avx2.c */
em_ggml_row_fn em_q4_0_row_avx2, em_q4_1_row_avx2, em_iq4_nl_row_avx2, em_iq4_xs_row_avx2,
    em_q6_k_row_avx2;

/* Whether this CPU runs AVX2. */
bool em_cpu_has_avx2(void);

/* Defines the row function NAME (parameters src, dst, n) with its loops also compiled for AVX2:
 * the clone this CPU runs is chosen at load time. The clones are static and NAME calls them,
 * because clang 14 exports a target_clones function only under a mangled name. Use:
 *   EM_CLONED_ROW(em_x_row) { ...loops over src, dst, n... } */
#define EM_CLONED_ROW(name)                                                                        \
    __attribute__((target_clones("avx2", "default"))) static void name##_clones(                   \
        const void *src, float *dst, int64_t n);                                                   \
    void name(const void *src, float *dst, int64_t n) {                                            \
        name##_clones(src, dst, n);                                                                \
    }                                                                                              \
    __attribute__((target_clones("avx2", "default"))) static void name##_clones(                   \
        const void *src, float *dst, int64_t n)

/* Whether this CPU converts halves in hardware (AVX and F16C). */
bool em_cpu_has_f16c(void);

/* A little-endian IEEE half at p, as a float. */
static inline float em_half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return em_f16_to_f32(h);
}

/* Q3_K's 16 six-bit scales, less 32, from its 12 bytes: low nibbles from bytes 0..7 (scale i in
 * byte i%8, low nibble for i < 8), high two bits from bytes 8..11 (scale i: byte 8 + i%4, bits
 * 2*(i/4)); the CPU forward's ggml-precision dot products read them too. */
static inline void em_k3_scales(const uint8_t *s, int8_t out[16]) {
    for (int i = 0; i < 16; i++) {
        int lo = (s[i % 8] >> (4 * (i / 8))) & 0x0f, hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)((lo | hi << 4) - 32);
    }
}

/* The 6-bit scale and min of sub-block j of Q4_K/Q5_K from their 12 bytes (ggml's
 * get_scale_min_k4); the CPU forward's ggml-precision dot products read them too. */
static inline void em_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The non-linear 4-bit values of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
extern const int8_t em_iq4nl_values[16];
/* MXFP4's and NVFP4's E2M1 codes doubled as small integers (ggml's kvalues_mxfp4). */
extern const int8_t em_mxfp4_values[16];

/* An E8M0 exponent e as 2^(e - 128), the halved 2^(e - 127) that multiplies em_mxfp4_values, built
 * bit by bit as ggml's GGML_E8M0_TO_FP32_HALF (e < 2 gives the subnormals 2^-128 and 2^-127). */
static inline float em_e8m0_half(uint8_t e) {
    return em_f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* A ternary block's 256 values (-1, 0 or 1; TQ2_0's code 3 gives 2, as ggml's dequantizer and dot
 * product read it) in value order, without the scale: TQ1_0's 54 bytes, TQ2_0's 66. */
void em_tq1_0_values(const uint8_t *block, int8_t v[256]);
void em_tq2_0_values(const uint8_t *block, int8_t v[256]);

/* The scale of sub-block j (32 values) of an IQ4_XS block {f16 d, u16 scales_h, scales_l[4],
 * qs[128]}: nibble j % 2 of scales_l[j / 2] | bits 2 j, 2 j + 1 of scales_h << 4, less 32; the
 * CPU forward's ggml-precision dot products read them too. */
static inline int em_iq4_xs_scale(const uint8_t *block, int j) {
    unsigned scales_h = (unsigned)block[2] | (unsigned)block[3] << 8;
    return (int)(((block[4 + j / 2] >> (4 * (j % 2))) & 15) | ((scales_h >> (2 * j)) & 3) << 4) -
           32;
}

/* ggml's ksigns_iq2xs[i]: the 7 bits of i and an eighth that makes the count of ones even; bit j
 * set negates coordinate j of a grid point. Shared by the IQ2 and IQ3 types. */
static inline unsigned em_iq_signs(unsigned i) {
    return i | (unsigned)__builtin_parity(i) << 7;
}

#endif
