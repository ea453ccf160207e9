/* AWQ-style activation-aware scaling of one layer of a model, before quantization.
 *
 * A linear layer y = W x (W: n_out rows of n_in) computes the same with W' = W diag(s) and
 * x' = x / s for any positive s; when x comes out of an RMSNorm with weight g (or out of another
 * linear layer's rows), dividing g (those rows) by s makes the model compute x' instead of x, so
 * the unquantized model computes the same function (up to float rounding). Quantizing W' instead
 * of W gives the input channels with large activations finer steps (s_j > 1 for them).
 *
 * Per layer, three groups of weights that read one input, each with one s:
 *   qkv      attn_q, attn_k, attn_v     (input: the attention norm)  1/s folded into attn_norm
 *   gate_up  ffn_gate, ffn_up           (input: the MLP norm)        1/s folded into ffn_norm
 *   down     ffn_down                   (input: silu(gate) * up)     1/s folded into the rows of
 *            ffn_up (row j of up makes input channel j of down, and the product is linear in it)
 * attn_output is not scaled: its input (attention's output) is linear in attn_v's rows, but with
 * grouped-query attention one v row serves several of attn_output's columns, so one s could not
 * suit them all; it is quantized as it is. A group is scaled only when the plan quantizes all of
 * its weights (for down: ffn_down and ffn_up) and the statistics hold its input.
 *
 * The scales: s_j = max(a_j^alpha, 1e-4), divided by sqrt(max_j s_j * min_j s_j), with a_j the
 * input channel's mean |x| (sum_abs / count; the RMS sqrt(sum_x2 / count) when the statistics
 * came from a llama.cpp imatrix file, which has no |x| sums). alpha is searched over 0, 0.05, ...,
 * 1 (alpha 0 is s = 1: the plain quantization), minimising the estimated output error
 *     E(alpha) = sum over the group's weights, rows r and columns j of
 *                e_j * (W[r][j] - dequantize(quantize(W' row r))[j] / s_j)^2,
 * e_j = sum_x2 / count the channel's mean square: E[|dW x|^2] with the cross-channel terms
 * E[x_i x_j] (i != j) dropped, the activations treated as uncorrelated across channels. The search
 * looks at up to 512 evenly spaced rows of each weight (all of them when fewer). Each weight is
 * quantized with its own scheme of the plan (mixes included), plainly, or, with weighted rounding,
 * with the importance weights of the rescaled weight's columns, qw_j = e_j / s_j^2 (its input is
 * x_j / s_j), through the scheme's weighted form (llama-quantize --imatrix's rounding after the
 * rescaling). The order is down, then gate_up (on ffn_up's already rescaled rows), then qkv.
 * Deterministic: errors are summed in row order. */
#ifndef EVALMESH_QUANT_AWQ_H
#define EVALMESH_QUANT_AWQ_H

#include "util/error.h"
#include "stages/model/loaded_model.h"
#include "stages/quant/activation_stats.h"
#include "stages/quant/quant_plan.h"

enum { EM_AWQ_QKV, EM_AWQ_GATE_UP, EM_AWQ_DOWN, EM_AWQ_GROUPS };

/* The weights AWQ touches in a layer, in em_awq_layer.w order. */
enum { EM_AWQ_WQ, EM_AWQ_WK, EM_AWQ_WV, EM_AWQ_WGATE, EM_AWQ_WUP, EM_AWQ_WDOWN, EM_AWQ_WEIGHTS };

typedef struct em_awq_layer {
    float *w[EM_AWQ_WEIGHTS];   /* (n_out, n_in) the rescaled weight as floats; NULL: unchanged */
    float *qw[EM_AWQ_WEIGHTS];  /* (n_in) with weighted rounding: e_j / s_j^2 for w[i]; else NULL */
    float *attn_norm;           /* (dim) the folded norm weight; NULL: unchanged */
    float *ffn_norm;            /* (dim) */
    float alpha[EM_AWQ_GROUPS]; /* the chosen exponent; -1: the group was not scaled */
    double error[EM_AWQ_GROUPS];       /* E at the chosen alpha */
    double error_plain[EM_AWQ_GROUPS]; /* E at alpha 0 (the plain quantization) */
} em_awq_layer;

/* Scales layer `layer` of m (see above). fixed_alpha >= 0: use that exponent, no search (and no
 * quantization: the plan still says which groups are scaled). Statistics whose columns differ
 * from a weight's row length are an error (exit 2) naming the weight; threads: OpenMP threads. */
em_status em_awq_scale_layer(const em_model *m, int layer, const em_quant_plan *plan,
                             const em_activation_stats *stats, float fixed_alpha,
                             bool weighted_rounding, int threads, em_awq_layer *out);
void em_awq_layer_free(em_awq_layer *l);

#endif
