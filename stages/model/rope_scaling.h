/* RoPE scaling kinds, one row each (none, linear, llama3, yarn): the name GGUF's
 * `<arch>.rope.scaling.type` and config.json's rope_scaling type give it, how its parameters are
 * read from either format, and what it does to the rotation: the frequency of each rotated pair
 * and the magnitude of cos and sin. The two formats' readers (model_gguf.c, hf_checkpoint.c), the
 * RoPE table (kernels/cpu/rope.c, which the cuda backend uploads too) and `inspect` go through
 * the row, so a new kind is one row here. */
#ifndef EVALMESH_MODEL_ROPE_SCALING_H
#define EVALMESH_MODEL_ROPE_SCALING_H

#include <stddef.h>

#include "util/error.h"
#include "stages/model/loaded_model.h"

/* Where a kind's parameters come from: one GGUF file's keys or one config.json's rope_scaling. */
typedef struct em_rope_params {
    /* The parameter named gguf_key (after "<arch>.") in a GGUF file or hf_key in config.json's
     * rope_scaling (NULL: the format has no such key), fallback when absent; an error (exit
     * status 2) when it is there but not a number. */
    em_status (*number)(const void *source, const char *gguf_key, const char *hf_key,
                        double fallback, double *out);
    const void *source;
    const char *where; /* the file, for messages */
} em_rope_params;

enum { EM_ROPE_SCALING_MAX_PARAMS = 8 };

typedef struct em_rope_scaling_kind {
    em_rope_scaling id;
    const char *name;
    /* Sets c's fields of this kind from p and the scaling factor (the file's; 0 when absent);
     * c's rope_freq_base, rope_dim and n_ctx_train are already read. */
    em_status (*read)(const em_rope_params *p, double factor, em_llama_config *c);
    /* The frequency of rotated pair i whose unscaled frequency is f. */
    double (*freq)(const em_llama_config *c, int i, double f);
    /* The factor cos and sin are multiplied by (YaRN's attention temperature), or NULL: 1. */
    double (*magnitude)(const em_llama_config *c);
    /* The parameters as (name, value) pairs for `inspect`; returns their count. */
    int (*params)(const em_llama_config *c, const char **names, double *values);
} em_rope_scaling_kind;

/* The row named name (len bytes, not NUL-terminated), or NULL. */
const em_rope_scaling_kind *em_rope_scaling_find(const char *name, size_t len);
/* The row of id (every em_rope_scaling has one). */
const em_rope_scaling_kind *em_rope_scaling_of(em_rope_scaling id);
/* "none, linear, llama3, yarn": the names, for messages. */
const char *em_rope_scaling_names(void);

#endif
