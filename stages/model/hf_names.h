/* Hugging Face Llama tensor names and layout versus GGUF's:
 *   model.embed_tokens.weight                    token_embd.weight
 *   model.norm.weight                            output_norm.weight
 *   lm_head.weight                               output.weight
 *   model.layers.N.input_layernorm.weight        blk.N.attn_norm.weight
 *   model.layers.N.self_attn.{q,k,v}_proj.*      blk.N.attn_{q,k,v}.* (weight and bias)
 *   model.layers.N.self_attn.o_proj.weight       blk.N.attn_output.weight
 *   model.layers.N.post_attention_layernorm.w..  blk.N.ffn_norm.weight
 *   model.layers.N.mlp.{gate,up,down}_proj.w..   blk.N.ffn_{gate,up,down}.weight
 *   model.layers.N.self_attn.{q,k}_norm.weight   blk.N.attn_{q,k}_norm.weight
 * (an architecture's row can rename per-layer tensors: Gemma 2's four norms, Phi-3's fused ones)
 * and the row order of the Q and K projections: HF rotates the two halves of each head
 * (rotate_half), GGUF rotates adjacent pairs, so within each head of head_dim rows
 *   gguf_row[2*i + j] = hf_row[j*head_dim/2 + i]   (i < head_dim/2, j in {0, 1}). */
#ifndef EVALMESH_HF_NAMES_H
#define EVALMESH_HF_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/model/architectures.h"
#include "stages/model/loaded_model.h"
#include "stages/model/model_storage.h"

/* The GGUF name of a HF tensor name into out, the architecture's own layer names
 * (architectures.h) first; false when the name is not a weight of the architecture. */
bool em_hf_to_gguf_name(const em_architecture *arch, const char *hf, char *out, size_t size);
/* The HF name of a GGUF tensor name; false when the name is not a weight of the architecture. */
bool em_gguf_to_hf_name(const em_architecture *arch, const char *gguf, char *out, size_t size);

/* Which tensors' rows take the Q/K permutation: attn_q (weight, bias) by query heads, attn_k by
 * KV heads, the per-head norms attn_q_norm/attn_k_norm as one head. */
typedef enum em_qk_kind { EM_QK_NONE, EM_QK_Q, EM_QK_K, EM_QK_NORM } em_qk_kind;
em_qk_kind em_gguf_name_qk_kind(const char *gguf);

/* Reorders the rows of a Q or K projection (rows = n_heads * head_dim rows of row_bytes each)
 * from HF order to GGUF order (to_gguf) or back. src and dst must not overlap. */
void em_qk_permute(const void *src, void *dst, int64_t rows, size_t row_bytes, int n_heads,
                   bool to_gguf);

/* The rows of t (a Q or K projection, bias or per-head norm of `heads` heads, its shape checked)
 * put in GGUF order into a copy that storage keeps, and t->data pointed at it. */
void em_qk_rows_to_gguf(em_tensor *t, int heads, em_model_storage *storage);

#endif
