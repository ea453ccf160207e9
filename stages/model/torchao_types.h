/* Tensor types of torchao's weight-only schemes, which no ggml type holds exactly (their scales
 * are per output row, or bf16 scale and zero point per group), with ids above ggml's:
 *   TORCHAO_I8 (200)      int8_weight_only: blocks of 32 {f32 s, 32 x i8 q}, x = s * q; s is the
 *                         row's scale, repeated in each of its blocks
 *   TORCHAO_I4_G<g> (201..204, g = 32, 64, 128, 256)  int4_weight_only with group size g:
 *                         blocks of g {bf16 s, bf16 z, g/2 B nibbles}, x = (q - 8) * s + z; value
 *                         j in the low nibble of byte j for j < g/2, else the high nibble of
 *                         byte j - g/2
 * ggml_types.c returns these rows for their ids, so tensor sizes and names work as for ggml's. */
#ifndef EVALMESH_TORCHAO_TYPES_H
#define EVALMESH_TORCHAO_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "stages/model/ggml_types.h"

enum {
    EM_TENSOR_TORCHAO_I8 = 200,
    EM_TENSOR_TORCHAO_I4_G32 = 201,
    EM_TENSOR_TORCHAO_I4_G64 = 202,
    EM_TENSOR_TORCHAO_I4_G128 = 203,
    EM_TENSOR_TORCHAO_I4_G256 = 204,
};

/* NULL for ids that are not torchao types. */
const em_ggml_type_info *em_torchao_type_info(uint32_t type);

/* The n values of one row of blocks of torchao type `type` (n a multiple of its block). */
void em_torchao_row_to_float(uint32_t type, const uint8_t *src, float *dst, int64_t n);

#endif
