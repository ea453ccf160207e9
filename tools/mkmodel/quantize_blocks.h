/* Q8_0 and Q4_0 quantization of rows (the block layouts of model.h), as llama.cpp's reference
 * quantizers do it:
 *   Q8_0: d = max|x| / 127, q = round(x / d)
 *   Q4_0: m = the x of largest magnitude (with its sign), d = m / -8, q = min(15, (int)(x/d + 8.5))
 */
#ifndef EVALMESH_MKMODEL_QUANTIZE_BLOCKS_H
#define EVALMESH_MKMODEL_QUANTIZE_BLOCKS_H

#include <stdint.h>

/* x has n values (a multiple of 32); out receives n/32 blocks. */
void quantize_q8_0(const float *x, int64_t n, void *out);
void quantize_q4_0(const float *x, int64_t n, void *out);

#endif
