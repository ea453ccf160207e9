/* The two model readers behind em_model_load: GGUF files and Hugging Face safetensors
 * checkpoints. Both produce the same em_model (GGUF tensor names and layout). */
#ifndef EVALMESH_MODEL_LOADERS_H
#define EVALMESH_MODEL_LOADERS_H

#include "stages/model/loaded_model.h"

/* in_memory: see em_model_load_with. */
em_status em_model_load_gguf(const char *path, bool in_memory, em_model **out);
/* path: a directory (config.json, model.safetensors or model.safetensors.index.json) or a
 * .safetensors file with config.json beside it. */
em_status em_model_load_hf(const char *path, bool in_memory, em_model **out);

#endif
