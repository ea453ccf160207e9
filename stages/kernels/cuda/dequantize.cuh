/* Decoders of the quantized blocks of the tensor-type table (ggml's and evalmesh's torchao
 * weight-only types), one per type family, usable on the device (the dequantize kernels of
 * device_weights.cu) and on the host (the test that checks them against the type table bit for
 * bit, tests/gpu/test_cuda_dequantize.cu). Each writes one block's values as floats in the order
 * the block stores them along the row (bytes per block in comments). A product and a sum are
 * rounded separately (em_mul_add), as the type table's C does: the device would fuse them. */
#ifndef EVALMESH_KERNELS_CUDA_DEQUANTIZE_CUH
#define EVALMESH_KERNELS_CUDA_DEQUANTIZE_CUH

#include <stdint.h>

#define EM_HD __host__ __device__ static inline

/* IEEE half bits to float, exact for every value (subnormals, infinities, NaN). */
EM_HD float em_half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    union {
        uint32_t u;
        float f;
    } v;
    v.u = bits;
    return v.f;
}

EM_HD float em_read_half(const uint8_t *p) {
    return em_half_bits_to_float((uint16_t)(p[0] | (p[1] << 8)));
}

/* a b + c with the product rounded before the sum (no fused multiply-add), as on the host. */
EM_HD float em_mul_add(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(__fmul_rn(a, b), c);
#else
    return a * b + c;
#endif
}

/* Q8_0 (34 bytes): d (half), 32 int8. */
EM_HD void em_block_q8_0(const uint8_t *b, float *y) {
    float d = em_read_half(b);
    for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)b[2 + i] * d;
}

/* Q4_0 (18 bytes): d, 16 bytes of nibbles: value j low nibble, j + 16 high, minus 8. */
EM_HD void em_block_q4_0(const uint8_t *b, float *y) {
    float d = em_read_half(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0xf) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

/* Q4_1 (20 bytes): d, m, nibbles as Q4_0 without the offset: q d + m. */
EM_HD void em_block_q4_1(const uint8_t *b, float *y) {
    float d = em_read_half(b), m = em_read_half(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = em_mul_add((float)(qs[j] & 0xf), d, m);
        y[j + 16] = em_mul_add((float)(qs[j] >> 4), d, m);
    }
}

/* The fifth bits of Q5_0/Q5_1: a little-endian 32-bit mask, bit j for value j. */
EM_HD uint32_t em_read_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Q5_0 (22 bytes): d, 4 bytes of fifth bits, 16 bytes of nibbles; minus 16. */
EM_HD void em_block_q5_0(const uint8_t *b, float *y) {
    float d = em_read_half(b);
    uint32_t qh = em_read_u32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (int)((qs[j] & 0xf) | (((qh >> j) & 1u) << 4));
        int hi = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
        y[j] = (float)(lo - 16) * d;
        y[j + 16] = (float)(hi - 16) * d;
    }
}

/* Q5_1 (24 bytes): d, m, fifth bits, nibbles: q d + m. */
EM_HD void em_block_q5_1(const uint8_t *b, float *y) {
    float d = em_read_half(b), m = em_read_half(b + 2);
    uint32_t qh = em_read_u32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (int)((qs[j] & 0xf) | (((qh >> j) & 1u) << 4));
        int hi = (int)((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
        y[j] = em_mul_add((float)lo, d, m);
        y[j + 16] = em_mul_add((float)hi, d, m);
    }
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block's 12 scale bytes. */
EM_HD void em_k4_scale_min(int j, const uint8_t *q, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K (144 bytes, 256 values): d, dmin, 12 scale bytes, 128 bytes of nibbles; per 64 values the
 * low nibbles of 32 bytes (sub-block 2i) then their high nibbles (2i+1): d sc q - dmin m. */
EM_HD void em_block_q4_k(const uint8_t *b, float *y) {
    float d = em_read_half(b), dmin = em_read_half(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        int sc, m;
        em_k4_scale_min(is, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        em_k4_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[j + l] = em_mul_add(d1, (float)(q[l] & 0xf), -m1);
        for (int l = 0; l < 32; l++) y[j + 32 + l] = em_mul_add(d2, (float)(q[l] >> 4), -m2);
    }
}

/* Q5_K (176 bytes): d, dmin, 12 scale bytes, 32 bytes of fifth bits (two bits per 64 values),
 * 128 bytes of nibbles, as Q4_K. */
EM_HD void em_block_q5_k(const uint8_t *b, float *y) {
    float d = em_read_half(b), dmin = em_read_half(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
        int sc, m;
        em_k4_scale_min(is, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        em_k4_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++)
            y[j + l] = em_mul_add(d1, (float)((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)), -m1);
        for (int l = 0; l < 32; l++)
            y[j + 32 + l] = em_mul_add(d2, (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)), -m2);
    }
}

/* Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales, d; per 128
 * values four runs of 32: d scale (q - 32). */
EM_HD void em_block_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = em_read_half(b + 208);
    for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (int)((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = (int)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[n + l] = d * (float)sc[is] * (float)q1;
            y[n + l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[n + l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[n + l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
    }
}

/* torchao int8 weight-only (evalmesh's TORCHAO_I8, 36 bytes): a float scale s, 32 int8: q s. */
EM_HD void em_block_torchao_i8(const uint8_t *b, float *y) {
    union {
        uint32_t u;
        float f;
    } s;
    s.u = em_read_u32(b);
    for (int i = 0; i < 32; i++) y[i] = s.f * (float)(int8_t)b[4 + i];
}

/* torchao int4 weight-only with groups of G (TORCHAO_I4_G<G>, 4 + G/2 bytes): BF16 scale s and
 * zero z, G/2 bytes of nibbles: value j low nibble, j + G/2 high: (q - 8) s + z. */
template <int G> EM_HD void em_block_torchao_i4(const uint8_t *b, float *y) {
    union {
        uint32_t u;
        float f;
    } s, z;
    s.u = (uint32_t)(b[0] | (b[1] << 8)) << 16;
    z.u = (uint32_t)(b[2] | (b[3] << 8)) << 16;
    const uint8_t *qs = b + 4;
    for (int j = 0; j < G / 2; j++) {
        y[j] = em_mul_add((float)((qs[j] & 0xf) - 8), s.f, z.f);
        y[j + G / 2] = em_mul_add((float)((qs[j] >> 4) - 8), s.f, z.f);
    }
}

/* The table of device-dequantized families, one row per type: X(tensor type id, values per
 * block, bytes per block, decoder). A type not here is dequantized on the host through the type
 * table. */
#define EM_CUDA_BLOCK_TYPES                                                                        \
    X(8, 32, 34, em_block_q8_0)                                                                    \
    X(2, 32, 18, em_block_q4_0)                                                                    \
    X(3, 32, 20, em_block_q4_1)                                                                    \
    X(6, 32, 22, em_block_q5_0)                                                                    \
    X(7, 32, 24, em_block_q5_1)                                                                    \
    X(12, 256, 144, em_block_q4_k)                                                                 \
    X(13, 256, 176, em_block_q5_k)                                                                 \
    X(14, 256, 210, em_block_q6_k)                                                                 \
    X(200, 32, 36, em_block_torchao_i8)                                                            \
    X(201, 32, 20, em_block_torchao_i4<32>)                                                        \
    X(202, 64, 36, em_block_torchao_i4<64>)                                                        \
    X(203, 128, 68, em_block_torchao_i4<128>)                                                      \
    X(204, 256, 132, em_block_torchao_i4<256>)

#undef EM_HD
#endif
