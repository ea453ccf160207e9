/* The tokenizer family table (see tokenizer_family.h): SentencePiece-style BPE (spm.c) and
 * byte-level BPE (bpe.c), with llama.cpp's defaults (src/llama-vocab.cpp). */
#include "stages/tokenizer/tokenizer_family.h"

#include <stdio.h>
#include <string.h>

#include "stages/tokenizer/tokenizer_impl.h"

const em_tokenizer_family em_tokenizer_family_spm = {
    .name = "llama",
    .default_bos = 1,
    .default_eos = 2,
    .default_unk = 0,
    .default_add_bos = true,
    .default_add_space_prefix = true,
    .space_prefix = true,
    .pre_tokenized = false,
    .merges_by_rank = false,
    .hex_byte_tokens = true,
    .prepare = em_spm_prepare,
    .state_new = em_spm_state_new,
    .state_free = em_spm_state_free,
    .encode = em_spm_encode,
};

const em_tokenizer_family em_tokenizer_family_bpe = {
    .name = "gpt2",
    .default_bos = -1,
    .default_eos = -1,
    .default_unk = -1,
    .default_add_bos = false,
    .default_add_space_prefix = false,
    .space_prefix = false,
    .pre_tokenized = true,
    .merges_by_rank = true,
    .hex_byte_tokens = false,
    .prepare = em_bpe_prepare,
    .state_new = em_bpe_state_new,
    .state_free = em_bpe_state_free,
    .encode = em_bpe_encode,
};

static const em_tokenizer_family *const families[] = {&em_tokenizer_family_spm,
                                                      &em_tokenizer_family_bpe};
#define N_FAMILIES (sizeof families / sizeof families[0])

const em_tokenizer_family *em_tokenizer_family_named(const char *name, size_t len) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (strlen(families[i]->name) == len && memcmp(families[i]->name, name, len) == 0)
            return families[i];
    return NULL;
}

const char *em_tokenizer_family_names(void) {
    static _Thread_local char names[128];
    size_t used = 0;
    for (size_t i = 0; i < N_FAMILIES; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 families[i]->name);
    return names;
}
