/* Text to token ids and back, for the two tokenizer families Llama-style models use:
 * SentencePiece-style BPE (GGUF `tokenizer.ggml.model = llama`) and byte-level BPE
 * (`gpt2`, with the pre-tokenizer regexes of GPT-2 and Llama 3), loaded from GGUF metadata or
 * a Hugging Face tokenizer.json. */
#ifndef EVALMESH_TOKENIZER_H
#define EVALMESH_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runner/util/error.h"

typedef struct em_tokenizer em_tokenizer;

/* Loads from a GGUF file (its tokenizer.* metadata) or a tokenizer.json (with a
 * tokenizer_config.json beside it when present, for add_bos/add_eos and special tokens). */
em_status em_tokenizer_load(const char *path, em_tokenizer **out);
void em_tokenizer_free(em_tokenizer *tok);
struct em_gguf;
/* Builds the tokenizer described by a GGUF file's tokenizer.ggml.* metadata. */
em_status em_tokenizer_from_gguf(const struct em_gguf *gguf, em_tokenizer **out);

typedef struct em_encode_options {
    bool add_bos; /* prepend BOS (default: what the tokenizer file says) */
    bool add_eos;
    bool parse_special; /* match special tokens (e.g. "<|begin_of_text|>") in the text */
} em_encode_options;

/* The tokenizer file's own choices for add_bos/add_eos, parse_special off. */
em_encode_options em_tokenizer_default_options(const em_tokenizer *tok);

/* Encodes len bytes of text into *ids (malloc'd, *count entries). Text that is not valid UTF-8 is
 * an error naming the byte offset (exit status 2). */
em_status em_tokenizer_encode(const em_tokenizer *tok, const char *text, size_t len,
                              em_encode_options options, int32_t **ids, size_t *count);
/* Decodes ids back to text (malloc'd, NUL-terminated; *len bytes). Special tokens are skipped
 * unless keep_special. */
em_status em_tokenizer_decode(const em_tokenizer *tok, const int32_t *ids, size_t count,
                              bool keep_special, char **text, size_t *len);

int32_t em_tokenizer_vocab_size(const em_tokenizer *tok);
int32_t em_tokenizer_bos(const em_tokenizer *tok); /* -1 when there is none */
int32_t em_tokenizer_eos(const em_tokenizer *tok);
const char *em_tokenizer_kind(const em_tokenizer *tok); /* "llama" (SentencePiece) or "gpt2" */
const char *em_tokenizer_token_text(const em_tokenizer *tok, int32_t id);

#endif
