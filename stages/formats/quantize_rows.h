/* The from_float and from_float_imatrix columns of the tensor-type table (ggml_types.c):
 *   quantize_q.c        ggml's 32-value blocks: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1
 *   quantize_k.c        ggml's 256-value super-blocks: Q4_K, Q5_K, Q6_K
 *   quantize_torchao.c  torchao's int8_weight_only and int4_weight_only
 *   (those reproduce the reference quantizers bit for bit: the quantize stage's schemes)
 *   quantize_plain.c    F32, F16, BF16 (rounding to nearest even)
 *   quantize_simple.c   Q2_K, Q3_K, IQ4_NL, IQ4_XS, TQ2_0 with simply chosen scales
 * Each takes n floats (a multiple of the type's block) and writes the blocks to out; the _imatrix
 * forms also take qw, the n importance weights of the row's columns (see ggml_types.h). */
#ifndef EVALMESH_QUANTIZE_ROWS_H
#define EVALMESH_QUANTIZE_ROWS_H

#include "stages/formats/ggml_types.h"

em_ggml_from_float_fn em_quantize_row_q8_0, em_quantize_row_q4_0, em_quantize_row_q4_1,
    em_quantize_row_q5_0, em_quantize_row_q5_1;
em_ggml_from_float_imatrix_fn em_quantize_row_q4_0_imatrix, em_quantize_row_q4_1_imatrix,
    em_quantize_row_q5_0_imatrix, em_quantize_row_q5_1_imatrix;

em_ggml_from_float_fn em_quantize_row_q4_k, em_quantize_row_q5_k, em_quantize_row_q6_k;
em_ggml_from_float_imatrix_fn em_quantize_row_q4_k_imatrix, em_quantize_row_q5_k_imatrix,
    em_quantize_row_q6_k_imatrix;

/* int8: the row is one group (its scale repeated in each 32-value block); int4: groups of g. */
em_ggml_from_float_fn em_quantize_row_torchao_int8, em_quantize_row_torchao_int4_g32,
    em_quantize_row_torchao_int4_g64, em_quantize_row_torchao_int4_g128,
    em_quantize_row_torchao_int4_g256;
em_ggml_from_float_imatrix_fn em_quantize_row_torchao_int4_g32_imatrix,
    em_quantize_row_torchao_int4_g64_imatrix, em_quantize_row_torchao_int4_g128_imatrix,
    em_quantize_row_torchao_int4_g256_imatrix;

em_ggml_from_float_fn em_quantize_row_f32, em_quantize_row_f16, em_quantize_row_bf16;
em_ggml_from_float_fn em_quantize_row_q2_k, em_quantize_row_q3_k, em_quantize_row_iq4_nl,
    em_quantize_row_iq4_xs, em_quantize_row_tq2_0;

#endif
