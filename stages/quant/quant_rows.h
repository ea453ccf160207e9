/* The row quantizers of every scheme family, referenced by the scheme table (quant_scheme.c):
 *   quant_legacy.c   ggml's 32-value blocks: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1
 *   quant_kquants.c  ggml's 256-value super-blocks: Q4_K, Q5_K, Q6_K
 *   quant_torchao.c  torchao's int8_weight_only and int4_weight_only
 *   quant_f16.c      F16, the fallback when no block fits a tensor's rows (type_fallback.h)
 * Each takes n floats (a multiple of the scheme's block) and writes the blocks to out. The
 * _imatrix forms also take qw, the n importance weights of the row's columns (llama-quantize
 * --imatrix: the calibration's mean x^2 per input column), the same for every row of a tensor. */
#ifndef EVALMESH_QUANT_ROWS_H
#define EVALMESH_QUANT_ROWS_H

#include <stdint.h>

void em_quantize_row_f16(const float *x, int64_t n, void *out);

void em_quantize_row_q8_0(const float *x, int64_t n, void *out);
void em_quantize_row_q4_0(const float *x, int64_t n, void *out);
void em_quantize_row_q4_1(const float *x, int64_t n, void *out);
void em_quantize_row_q5_0(const float *x, int64_t n, void *out);
void em_quantize_row_q5_1(const float *x, int64_t n, void *out);

void em_quantize_row_q4_0_imatrix(const float *x, int64_t n, const float *qw, void *out);
void em_quantize_row_q4_1_imatrix(const float *x, int64_t n, const float *qw, void *out);
void em_quantize_row_q5_0_imatrix(const float *x, int64_t n, const float *qw, void *out);
void em_quantize_row_q5_1_imatrix(const float *x, int64_t n, const float *qw, void *out);

void em_quantize_row_q4_k(const float *x, int64_t n, void *out);
void em_quantize_row_q5_k(const float *x, int64_t n, void *out);
void em_quantize_row_q6_k(const float *x, int64_t n, void *out);
void em_quantize_row_q4_k_imatrix(const float *x, int64_t n, const float *qw, void *out);
void em_quantize_row_q5_k_imatrix(const float *x, int64_t n, const float *qw, void *out);
void em_quantize_row_q6_k_imatrix(const float *x, int64_t n, const float *qw, void *out);

/* int8: the row is one group (its scale repeated in each 32-value block); int4: groups of g. */
void em_quantize_row_torchao_int8(const float *x, int64_t n, void *out);
void em_quantize_row_torchao_int4_g32(const float *x, int64_t n, void *out);
void em_quantize_row_torchao_int4_g64(const float *x, int64_t n, void *out);
void em_quantize_row_torchao_int4_g128(const float *x, int64_t n, void *out);
void em_quantize_row_torchao_int4_g256(const float *x, int64_t n, void *out);
void em_quantize_row_torchao_int4_g32_imatrix(const float *x, int64_t n, const float *qw,
                                              void *out);
void em_quantize_row_torchao_int4_g64_imatrix(const float *x, int64_t n, const float *qw,
                                              void *out);
void em_quantize_row_torchao_int4_g128_imatrix(const float *x, int64_t n, const float *qw,
                                               void *out);
void em_quantize_row_torchao_int4_g256_imatrix(const float *x, int64_t n, const float *qw,
                                               void *out);

#endif
