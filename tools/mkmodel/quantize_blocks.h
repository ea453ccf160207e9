/* The model maker's quantizers: one row per ggml type it can write (F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS, TQ2_0), in the block layouts of ggml-common.h
 * (see stages/model/dequantize_*.c). Q8_0 and Q4_0 round as llama.cpp's reference quantizers do;
 * the others pick scales simply (absolute maximum, or min and max, per sub-block) and then the
 * nearest level for each value: valid files whose values are close to the floats, not the
 * best quantization llama-quantize would find. */
#ifndef EVALMESH_MKMODEL_QUANTIZE_BLOCKS_H
#define EVALMESH_MKMODEL_QUANTIZE_BLOCKS_H

#include <stdint.h>

/* x has n values (a multiple of the type's block size); out receives the n values' blocks. */
typedef void quantize_fn(const float *x, int64_t n, void *out);

/* NULL when the maker cannot write that ggml type. */
quantize_fn *quantizer_for(uint32_t type);

#endif
