/* Binds a model's tensor table (GGUF names) to the Llama-family layout: finds token_embd,
 * output_norm, output (absent: tied to token_embd), rope_freqs (optional) and blk.N.* for every
 * layer, checks each tensor's type and shape against the config, and converts 1-D tensors (norms,
 * biases) stored as F16/BF16 to F32 so that every em_model has F32 norms and biases. Used by the
 * GGUF and safetensors loaders. */
#ifndef EVALMESH_LLAMA_WEIGHTS_H
#define EVALMESH_LLAMA_WEIGHTS_H

#include "stages/model/loaded_model.h"
#include "stages/model/model_storage.h"

/* Checks the config's numbers against each other (heads divide the dimension, ...). */
em_status em_llama_config_check(const em_llama_config *c, const char *path);
/* Fills model->tok_embd, output_norm, output, rope_freqs, layers and config.tied_output and
 * has_qkv_bias, with the tensors of the config's architecture (architectures.h): fused Q/K/V and
 * gate/up projections become row views of the fused tensor, and with permute the Q/K rows (and
 * biases and per-head norms) are put from rotate-half order into adjacent pairs. */
em_status em_llama_bind(em_model *model, em_model_storage *storage, bool permute);
/* Every RMSNorm weight w of a bound model becomes 1 + w (an owned F32 copy): Hugging Face's Gemma
 * stores w for a norm that scales by 1 + w, GGUF stores 1 + w. */
void em_llama_norm_offset(em_model *model, em_model_storage *storage);

#endif
