/* Hugging Face Llama tensor names and layout versus GGUF's:
 *   model.embed_tokens.weight                    token_embd.weight
 *   model.norm.weight                            output_norm.weight
 *   lm_head.weight                               output.weight
 *   model.layers.N.input_layernorm.weight        blk.N.attn_norm.weight
 *   model.layers.N.self_attn.{q,k,v}_proj.*      blk.N.attn_{q,k,v}.* (weight and bias)
 *   model.layers.N.self_attn.o_proj.weight       blk.N.attn_output.weight
 *   model.layers.N.post_attention_layernorm.w..  blk.N.ffn_norm.weight
 *   model.layers.N.mlp.{gate,up,down}_proj.w..   blk.N.ffn_{gate,up,down}.weight
 * and the row order of the Q and K projections: HF rotates the two halves of each head
 * (rotate_half), GGUF rotates adjacent pairs, so within each head of head_dim rows
 *   gguf_row[2*i + j] = hf_row[j*head_dim/2 + i]   (i < head_dim/2, j in {0, 1}). */
#ifndef EVALMESH_HF_NAMES_H
#define EVALMESH_HF_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/model/loaded_model.h"
#include "stages/model/model_storage.h"

/* The GGUF name of a HF tensor name into out; false when the name is not a Llama weight. */
bool em_hf_to_gguf_name(const char *hf, char *out, size_t size);
/* The HF name of a GGUF tensor name; false when the name is not a Llama weight. */
bool em_gguf_to_hf_name(const char *gguf, char *out, size_t size);
/* True for the tensors whose rows need the Q/K permutation (attn_q/attn_k weight and bias). */
bool em_gguf_name_is_qk(const char *gguf, bool *is_q);

/* Reorders the rows of a Q or K projection (rows = n_heads * head_dim rows of row_bytes each)
 * from HF order to GGUF order (to_gguf) or back. src and dst must not overlap. */
void em_qk_permute(const void *src, void *dst, int64_t rows, size_t row_bytes, int n_heads,
                   bool to_gguf);

/* When t (named in GGUF terms) is a Q or K projection with the n_heads * head_dim rows c
 * expects: its rows put in GGUF order into a copy that storage keeps, and t->data pointed at it.
 * Other tensors, and a Q/K of another shape (em_llama_bind reports that), are left alone. */
void em_qk_tensor_to_gguf(em_tensor *t, const em_llama_config *c, em_model_storage *storage);

#endif
