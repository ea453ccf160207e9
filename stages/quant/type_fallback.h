/* llama-quantize's fallback for a tensor whose rows its wanted type's block does not divide
 * (llama.cpp src/llama-quant.cpp, llama_tensor_get_type, the `nx % qk_k != 0` branch):
 *   - Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (llama.cpp's rows for the types this table
 *     quantizes to; it also sends Q2_K, Q3_K and the IQ types to IQ4_NL and TQ1_0/TQ2_0 to Q4_0);
 *   - F16 when the fallback's block does not divide the rows either, as llama.cpp does.
 * llama.cpp stops on ggml's 32-value types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) with "Unsupported tensor
 * size encountered"; here they go to F16, its last resort, so a model whose feed-forward length is
 * not a multiple of 32 (stories260K: 172) can be quantized. torchao's schemes have no fallback. */
#ifndef EVALMESH_TYPE_FALLBACK_H
#define EVALMESH_TYPE_FALLBACK_H

#include <stdint.h>

#include "stages/formats/ggml_types.h"

/* The scheme for rows of row_values values that wanted: wanted itself when its block divides
 * them, else the fallback above; NULL when wanted does not fit and has no fallback. */
const em_ggml_type_info *em_quant_type_fallback(const em_ggml_type_info *wanted,
                                                int64_t row_values);

#endif
