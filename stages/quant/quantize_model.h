/* Quantizing a loaded model: a new em_model, independent of the source (it maps the same file
 * again and owns its quantized tensors), in which the tensors the plan chooses (quant_plan.h)
 * hold quantized blocks of the plan's types. The forward runs those blocks directly; there is no
 * full-precision copy. The source tensors are read as floats (F32, F16, BF16 as they are;
 * already-quantized ones are refused unless allow_requantize, then dequantized first).
 *
 * With calibration statistics (activation_stats.h), as llama-quantize --imatrix does:
 *   - method RTN: each tensor is rounded with its scheme's importance-weighted form
 *     (stages/formats/quantize_rows.h), the weights of column j being the calibration's mean x_j^2
 *     (sum_x2[j] / count) for every row (schemes without a weighted form, Q8_0 and int8, ignore
 *     them);
 *   - method AWQ: the layers are first rescaled as awq.h says (the inverse scales folded into the
 *     norms and ffn_up's rows), then every tensor is rounded plainly;
 *   - method AWQ_IMATRIX: the same rescaling, with the rounding of RTN (the rescaled weights'
 *     importance is e_j / s_j^2, awq.h), in the alpha search and in the result.
 * The linear weights of the blocks that the plan quantizes need an entry with the weight's row
 * length as columns and a non-zero token count; a missing or mismatched one stops the
 * quantization (exit 2, naming the tensor). The token embedding (no linear input) and the output
 * head use their entry when there is one and are rounded plainly otherwise. */
#ifndef EVALMESH_QUANTIZE_MODEL_H
#define EVALMESH_QUANTIZE_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/model/loaded_model.h"
#include "stages/quant/activation_stats.h"
#include "stages/quant/awq.h"
#include "stages/quant/quant_plan.h"

typedef enum em_quant_method {
    EM_QUANT_RTN,         /* round to nearest (importance-weighted with statistics) */
    EM_QUANT_AWQ,         /* activation-aware scaling, then round to nearest (needs statistics) */
    EM_QUANT_AWQ_IMATRIX, /* activation-aware scaling, then importance-weighted rounding */
} em_quant_method;

typedef struct em_quantize_options {
    em_quant_plan plan;
    bool allow_requantize;
    int threads;                      /* OpenMP threads over rows; < 1: the default */
    const em_activation_stats *stats; /* calibration statistics, or NULL */
    em_quant_method method;
} em_quantize_options;

typedef struct em_quantize_summary {
    size_t quantized;                  /* tensors quantized */
    size_t bytes_before;               /* of the quantized tensors, as stored in the source */
    size_t bytes_after;                /* of the quantized tensors, quantized */
    size_t weighted;                   /* tensors rounded with importance weights */
    size_t awq_groups;                 /* AWQ: weight groups rescaled (awq.h) */
    double awq_alpha_sum;              /* AWQ: the sum of their chosen exponents */
    double awq_error, awq_error_plain; /* AWQ: the estimated output errors, summed (awq.h) */
} em_quantize_summary;

/* The checks of opt->stats against the tensors the plan quantizes (above; NULL stats pass). */
em_status em_quantize_check_stats(const em_model *src, const em_quantize_options *opt);

/* Errors (exit 2) name the tensor: a row length the scheme's block does not divide, a tensor
 * already quantized, a source type that cannot be read as floats. */
em_status em_quantize_model(const em_model *src, const em_quantize_options *opt, em_model **out,
                            em_quantize_summary *summary);

/* Quantizes rows x rows of n floats with scheme s into out (rows * em_quant_row_bytes bytes);
 * qw: n importance weights for the columns (the scheme's weighted form), or NULL. */
void em_quantize_rows(const em_ggml_type_info *s, const float *x, int64_t rows, int64_t n,
                      const float *qw, void *out);

#endif
