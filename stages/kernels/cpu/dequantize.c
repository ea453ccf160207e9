/* Weight rows to floats: F32 copy, F16 (hardware F16C when the CPU has it, else a bit-exact
 * scalar conversion), BF16 (a shift), Q8_0 and Q4_0 (scale times small integers). The loops are
 * also compiled for AVX2 and chosen at load time; the results are exact either way. */
#include "stages/kernels/cpu/dequantize.h"

#include "stages/model/torchao_types.h"

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

bool em_weight_type_supported(em_tensor_type type) {
    return type == EM_TENSOR_F32 || type == EM_TENSOR_F16 || type == EM_TENSOR_BF16 ||
           type == EM_TENSOR_Q8_0 || type == EM_TENSOR_Q4_0 || em_torchao_type_info(type);
}

float em_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) { /* inf or nan */
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) { /* normal */
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) { /* zero */
        bits = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while ((mant & 0x400) == 0);
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* src is (n) halves, dst is (n) floats, n a multiple of 8. */
__attribute__((target("avx,f16c"))) static void f16_row_f16c(const uint16_t *src, float *dst,
                                                             int64_t n) {
    for (int64_t i = 0; i < n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
}

/* Asked once through cpuid (clang's __builtin_cpu_supports does not know "f16c"); cpuid is slow
 * in a virtual machine, where it traps to the hypervisor, so the answer is kept. */
bool em_cpu_has_f16c(void) {
    static int known = -1; /* -1: not asked yet; threads racing here all store the same answer */
    if (known < 0) {
        unsigned a, b, c, d;
        known = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    }
    return known == 1;
}

static void f16_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t head = em_cpu_has_f16c() ? n - n % 8 : 0;
    if (head > 0) f16_row_f16c(src, dst, head);
    for (int64_t i = head; i < n; i++) dst[i] = em_f16_to_f32(src[i]);
}

__attribute__((target_clones("avx2", "default"))) static void bf16_row(const uint16_t *src,
                                                                       float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}

/* A Q8_0 block: f16 scale d, then 32 int8 q; value j = d * q[j]. */
__attribute__((target_clones("avx2", "default"))) static void q8_0_row(const uint8_t *src,
                                                                       float *dst, int64_t n) {
    for (int64_t b = 0; b < n / EM_QK; b++) {
        const uint8_t *block = src + b * (2 + EM_QK);
        uint16_t dh;
        memcpy(&dh, block, 2);
        float d = em_f16_to_f32(dh);
        const int8_t *q = (const int8_t *)(block + 2);
        float *out = dst + b * EM_QK;
        for (int j = 0; j < EM_QK; j++) out[j] = d * (float)q[j];
    }
}

/* A Q4_0 block: f16 scale d, then 16 bytes; value j<16 is the low nibble of byte j, value j>=16
 * the high nibble of byte j-16, each minus 8, times d. */
__attribute__((target_clones("avx2", "default"))) static void q4_0_row(const uint8_t *src,
                                                                       float *dst, int64_t n) {
    for (int64_t b = 0; b < n / EM_QK; b++) {
        const uint8_t *block = src + b * (2 + EM_QK / 2);
        uint16_t dh;
        memcpy(&dh, block, 2);
        float d = em_f16_to_f32(dh);
        const uint8_t *qs = block + 2;
        float *out = dst + b * EM_QK;
        for (int j = 0; j < EM_QK / 2; j++) {
            out[j] = d * (float)((qs[j] & 0x0f) - 8);
            out[j + EM_QK / 2] = d * (float)((qs[j] >> 4) - 8);
        }
    }
}

void em_rows_to_float(const em_tensor *w, int64_t row0, int64_t rows, float *dst, int64_t ld) {
    int64_t n_in = w->shape[0];
    size_t row_bytes = em_tensor_type_row_bytes(w->type, n_in);
    const uint8_t *src = (const uint8_t *)w->data + (size_t)row0 * row_bytes;
    for (int64_t r = 0; r < rows; r++, src += row_bytes, dst += ld) {
        switch (w->type) {
        case EM_TENSOR_F32:
            memcpy(dst, src, (size_t)n_in * sizeof(float));
            break;
        case EM_TENSOR_F16:
            f16_row((const uint16_t *)src, dst, n_in);
            break;
        case EM_TENSOR_BF16:
            bf16_row((const uint16_t *)src, dst, n_in);
            break;
        case EM_TENSOR_Q8_0:
            q8_0_row(src, dst, n_in);
            break;
        case EM_TENSOR_Q4_0:
            q4_0_row(src, dst, n_in);
            break;
        default:
            em_torchao_row_to_float((uint32_t)w->type, src, dst, n_in);
        }
    }
}
