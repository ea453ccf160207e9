/* Tensor types of torchao's weight-only schemes, which no ggml type holds exactly (their scales
 * are per output row, or bf16 scale and zero point per group), as rows of the type table
 * (ggml_types.c) with ids above ggml's:
 *   TORCHAO_I8 (200)      int8_weight_only: blocks of 32 {f32 s, 32 x i8 q}, x = s * q; s is the
 *                         row's scale, repeated in each of its blocks
 *   TORCHAO_I4_G<g> (201..204, g = 32, 64, 128, 256)  int4_weight_only with group size g:
 *                         blocks of g {bf16 s, bf16 z, g/2 B nibbles}, x = (q - 8) * s + z; value
 *                         j in the low nibble of byte j for j < g/2, else the high nibble of
 *                         byte j - g/2
 * The row functions below are their to_float columns. */
#ifndef EVALMESH_TORCHAO_TYPES_H
#define EVALMESH_TORCHAO_TYPES_H

#include <stdint.h>

enum {
    EM_TENSOR_TORCHAO_I8 = 200,
    EM_TENSOR_TORCHAO_I4_G32 = 201,
    EM_TENSOR_TORCHAO_I4_G64 = 202,
    EM_TENSOR_TORCHAO_I4_G128 = 203,
    EM_TENSOR_TORCHAO_I4_G256 = 204,
};

/* src: the blocks of n values (n a multiple of the block); dst: n floats. */
void em_torchao_i8_row(const void *src, float *dst, int64_t n);
void em_torchao_i4_g32_row(const void *src, float *dst, int64_t n);
void em_torchao_i4_g64_row(const void *src, float *dst, int64_t n);
void em_torchao_i4_g128_row(const void *src, float *dst, int64_t n);
void em_torchao_i4_g256_row(const void *src, float *dst, int64_t n);

#endif
