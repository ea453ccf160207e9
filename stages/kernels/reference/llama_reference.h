/* The plain C reference forward of a Llama-family model (llm.c's train_gpt2.c role): the same
 * composition as stages/kernels/llama_block.h, with every feature of the architecture table
 * (em_llama_config: embedding scale, q/k norms, post-norms, GeGLU, soft-caps, sliding windows,
 * the score scale and the sliding layers' RoPE base), written as straight loops in double
 * precision,
 * one position at a time, whole weights converted row by row, attention as the textbook
 * softmax(QK^T / sqrt(d)) V and the head as a full log-softmax. No tiling, no threads, no
 * cleverness: slow, and the yardstick tests hold the fast backends (any tp) against. Shares with
 * them only the reading of the file: the dequantizers and the RoPE frequencies of the config. */
#ifndef EVALMESH_KERNELS_LLAMA_REFERENCE_H
#define EVALMESH_KERNELS_LLAMA_REFERENCE_H

#include <stdint.h>

#include "util/error.h"
#include "stages/model/loaded_model.h"

/* One window of the model (its shapes checked by the fast forward's checks first): input and
 * target (T) ids, nll and argmax (T - score_from), as em_forward_backend.score_window. */
em_status em_llama_reference_window(const em_model *model, const int32_t *input,
                                    const int32_t *target, int T, int score_from, double *nll,
                                    int32_t *argmax);

#endif
