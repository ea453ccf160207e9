/* Writing a quantized model (quantize_model.h) as a GGUF file llama.cpp loads: the source file's
 * metadata (general.file_type and general.quantization_version set as llama-quantize sets them),
 * then every tensor in the source's order, with its quantized type and bytes. Needs a model loaded
 * from a GGUF file of a Llama-layout architecture (qwen2's Q/K rows are reordered in memory, see
 * loaded_model.h, and are refused), and ggml types only (torchao's are evalmesh's own). */
#ifndef EVALMESH_QUANT_GGUF_H
#define EVALMESH_QUANT_GGUF_H

#include "stages/model/loaded_model.h"
#include "util/error.h"

/* scheme: the plan's scheme (for general.file_type). Writes path.tmp, then renames it. */
em_status em_quantized_model_write_gguf(const em_model *m, const char *scheme, const char *path);

#endif
