/* Rows of the plain float types to floats: F32 (a copy), F16 (F16C when the CPU has it, else
 * the exact scalar conversion of half.h), BF16 (a shift). */
#include <cpuid.h>
#include <immintrin.h>

#include "stages/formats/dequantize_rows.h"

void em_f32_row(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

/* src is (n) halves, dst is (n) floats, n a multiple of 8. */
__attribute__((target("avx,f16c"))) static void f16_row_f16c(const uint8_t *src, float *dst,
                                                             int64_t n) {
    for (int64_t i = 0; i < n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
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

void em_f16_row(const void *src, float *dst, int64_t n) {
    const uint8_t *h = src;
    int64_t head = em_cpu_has_f16c() ? n - n % 8 : 0;
    if (head > 0) f16_row_f16c(h, dst, head);
    for (int64_t i = head; i < n; i++) dst[i] = em_half_at(h + 2 * i);
}

EM_CLONED_ROW(em_bf16_row) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, b + 2 * i, 2);
        dst[i] = em_bf16_to_f32(h);
    }
}
