/* Which tensors of a model a quantization touches, and with which scheme.
 *
 * A plan names one scheme of the tensor-type table (a type whose row has a scheme name,
 * ggml_types.h; every chosen tensor gets it) or one of llama-quantize's
 * mixes, Q4_K_M and Q5_K_M, which pick per tensor as llama.cpp's llama_tensor_get_type does for a
 * dense Llama model without an importance matrix:
 *   - base type Q4_K (Q4_K_M) or Q5_K (Q5_K_M);
 *   - attn_v.weight and ffn_down.weight of layer i get Q6_K when use_more_bits(i, n_layers):
 *     i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2;
 *   - the output head (or the token embedding when the head is tied to it) gets Q6_K, Q8_0 when
 *     its rows are not a multiple of 256.
 * A tensor whose rows the chosen type's block does not divide gets llama-quantize's fallback
 * (type_fallback.h: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, F16 when that does not fit
 * either), unless the plan is strict: then it keeps the chosen type, which the quantizer refuses.
 * The chosen tensors are the linear weights of the blocks (attn_q/k/v/output, ffn_gate/up/down),
 * plus the token embedding and the output head when asked, less the tensors named in exclude. */
#ifndef EVALMESH_QUANT_PLAN_H
#define EVALMESH_QUANT_PLAN_H

#include <stdbool.h>

#include "stages/model/loaded_model.h"
#include "stages/formats/ggml_types.h"

typedef struct em_quant_plan {
    const char *scheme;         /* a table scheme's name, "Q4_K_M" or "Q5_K_M" */
    bool embeddings;            /* also quantize token_embd */
    bool output;                /* also quantize the output head (when not tied to token_embd) */
    const char *const *exclude; /* tensor names kept as they are */
    size_t exclude_count;
    bool strict; /* no fallback: a type whose block does not divide a tensor's rows is an error */
} em_quant_plan;

/* Whether name is a scheme of the table or a mix. */
bool em_quant_plan_scheme_known(const char *name);
/* The llama_ftype a GGUF file quantized with scheme name records (general.file_type): the
 * type's row's, or the mix's; -1 when llama.cpp has none (torchao's) or name is no scheme. */
int em_quant_plan_ftype(const char *name);
/* The scheme for tensor t of model m under plan, or NULL when t stays as it is. */
const em_ggml_type_info *em_quant_plan_scheme_for(const em_quant_plan *plan, const em_model *m,
                                                  const em_tensor *t);
/* The scheme the plan chooses for t before any fallback (the same as em_quant_plan_scheme_for
 * when t's rows fit it or the plan is strict), or NULL when t stays as it is. */
const em_ggml_type_info *em_quant_plan_wanted_for(const em_quant_plan *plan, const em_model *m,
                                                  const em_tensor *t);

#endif
