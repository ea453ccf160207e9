/* The exact precision's products of one token (T = 1, a decoding step) read straight from
 * quantized or half weight rows: the same values as the type's conversion to floats
 * (stages/formats) and the same fma chains as em_gemm_few_tokens (gemm_microkernel.h), so the same
 * bits, without writing the rows as floats first (and, for the quantized types, transposing them).
 * One kernel per weight type, where this CPU has the instructions (AVX-512 with VBMI: Q4_1, Q8_0,
 * F16); other types and CPUs take the conversion and the GEMM. */
#ifndef EVALMESH_KERNELS_ONE_TOKEN_QUANTIZED_H
#define EVALMESH_KERNELS_ONE_TOKEN_QUANTIZED_H

#include <stddef.h>
#include <stdint.h>

#include "stages/formats/ggml_types.h"

/* c[j * ldc] = the chain acc = fma(x[k * x_stride], w_j[k], acc) over k = 0 .. K-1 from 0, for
 * the rows j < rows at w + j * row_bytes (K / 32 blocks each; F16: K halves), w_j[k] the row's
 * value k as the type's conversion gives it. */
typedef void em_one_token_quantized(int K, const float *x, size_t x_stride, const uint8_t *w,
                                    size_t row_bytes, int rows, float *c, size_t ldc);

/* The kernel for `type` on this CPU, or NULL. */
em_one_token_quantized *em_one_token_quantized_for(em_tensor_type type);

#endif
