/* Quantizing a loaded model: a new em_model, independent of the source (it maps the same file
 * again and owns its quantized tensors), in which the tensors the plan chooses (quant_plan.h)
 * hold quantized blocks of the plan's types. The forward runs those blocks directly; there is no
 * full-precision copy. The source tensors are read as floats (F32, F16, BF16 as they are;
 * already-quantized ones are refused unless allow_requantize, then dequantized first). */
#ifndef EVALMESH_QUANTIZE_MODEL_H
#define EVALMESH_QUANTIZE_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/model/loaded_model.h"
#include "stages/quant/quant_plan.h"

typedef struct em_quantize_options {
    em_quant_plan plan;
    bool allow_requantize;
    int threads; /* OpenMP threads over rows; < 1: the default */
} em_quantize_options;

typedef struct em_quantize_summary {
    size_t quantized;    /* tensors quantized */
    size_t bytes_before; /* of the quantized tensors, as stored in the source */
    size_t bytes_after;  /* of the quantized tensors, quantized */
} em_quantize_summary;

/* Errors (exit 2) name the tensor: a row length the scheme's block does not divide, a tensor
 * already quantized, a source type that cannot be read as floats. */
em_status em_quantize_model(const em_model *src, const em_quantize_options *opt, em_model **out,
                            em_quantize_summary *summary);

/* Quantizes rows x rows of n floats with scheme s into out (rows * em_quant_row_bytes bytes);
 * qw: n importance weights for the columns (the scheme's weighted form), or NULL. */
void em_quantize_rows(const em_quant_scheme *s, const float *x, int64_t rows, int64_t n,
                      const float *qw, void *out);

#endif
