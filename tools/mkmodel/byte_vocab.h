/* The byte-level vocabulary evalmesh-mkmodel writes by default: ids 0..255 are the 256 bytes
 * (as GPT-2's byte-to-unicode characters, so it is a byte-level BPE vocabulary with no merges:
 * GGUF tokenizer.ggml.model "gpt2"), 256 is BOS "<s>", 257 EOS "</s>", and ids from 258 up to
 * the model's vocabulary size are unused control tokens "<pad_N>". BOS is added by default. */
#ifndef EVALMESH_MKMODEL_BYTE_VOCAB_H
#define EVALMESH_MKMODEL_BYTE_VOCAB_H

#include <stdbool.h>

#include "stages/formats/gguf_writer.h"

#define BYTE_VOCAB_TOKENS 258

/* The token texts (UTF-8) and GGUF token types (1 normal, 3 control) of a vocabulary of n >= 258
 * tokens; free with byte_vocab_free. */
typedef struct byte_vocab {
    char **tokens;
    int *types;
    int n;
} byte_vocab;

byte_vocab byte_vocab_new(int n);
void byte_vocab_free(byte_vocab *v);
void byte_vocab_write_gguf(const byte_vocab *v, gguf_writer *w);
/* Writes tokenizer.json and tokenizer_config.json into dir; false on a write error. */
bool byte_vocab_write_json(const byte_vocab *v, const char *dir);

#endif
