/* Stored weight values as floats for the bf16 precision's AVX-512 kernels (bf16_dot.h's
 * round_stored_rows): 16 values of an F16, BF16 or F32 row, each its exact float. */
#ifndef EVALMESH_KERNELS_CPU_BF16_STORED_AVX512_H
#define EVALMESH_KERNELS_CPU_BF16_STORED_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "stages/formats/ggml_types.h"

/* Values c .. c + 15 of the row at `row` (those outside `live` as zeros). */
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline __m512
em_bf16_stored16(em_tensor_type type, const uint8_t *row, int c, __mmask16 live) {
    if (type == EM_TENSOR_F32) return _mm512_maskz_loadu_ps(live, (const float *)row + c);
    __m256i h = _mm256_maskz_loadu_epi16(live, (const uint16_t *)row + c);
    if (type == EM_TENSOR_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* BF16 */
}

#endif
