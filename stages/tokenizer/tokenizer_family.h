/* The tokenizer families, one row each: the name GGUF files give it (tokenizer.ggml.model),
 * llama.cpp's defaults for the keys a file leaves out, what the loaders read for it, and its
 * algorithm (preparing the vocabulary, per-call scratch state, encoding a stretch of text).
 * Adding a family is adding a row and its algorithm's file. Not for use outside this folder. */
#ifndef EVALMESH_TOKENIZER_FAMILY_H
#define EVALMESH_TOKENIZER_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct em_tokenizer em_tokenizer;
typedef struct em_ids em_ids;

typedef struct em_tokenizer_family {
    const char *name; /* tokenizer.ggml.model, and em_tokenizer_kind */
    /* llama.cpp's BOS, EOS and unknown ids (-1: none) and flags when a GGUF file has no key */
    int32_t default_bos, default_eos, default_unk;
    bool default_add_bos, default_add_space_prefix;
    /* A "▁" may go before the text and after each special token (add_space_prefix decides),
     * and decoding drops the one before the text. Without it add_space_prefix is always off. */
    bool space_prefix;
    /* Text is split into words by a pre-tokenizer row (tokenizer.ggml.pre) before merging. */
    bool pre_tokenized;
    /* Pairs merge by the rank of the merge (the merges list is required); else by the score of
     * the token they make (tokenizer.json's merges become those scores). */
    bool merges_by_rank;
    /* A byte without a token of its own is the token <0xNN> (byte fallback); else each byte is
     * a character of GPT-2's byte-to-unicode map. */
    bool hex_byte_tokens;
    /* After the vocabulary is set: the family's maps and byte tokens. */
    void (*prepare)(em_tokenizer *tok);
    /* Scratch state for encoding, one per call so that threads can share a tokenizer. */
    void *(*state_new)(void);
    void (*state_free)(void *state);
    /* Encodes one fragment of text (no special tokens in it); `offset` is where it starts in the
     * caller's text, for messages; `prefix_space` puts a "▁" before it (space_prefix families). */
    em_status (*encode)(const em_tokenizer *tok, void *state, const char *text, size_t len,
                        size_t offset, bool prefix_space, em_ids *out);
} em_tokenizer_family;

/* The rows, by what tokenizer.json structure selects: a Metaspace setup or byte-level BPE. */
extern const em_tokenizer_family em_tokenizer_family_spm, em_tokenizer_family_bpe;

/* The family GGUF names name[0..len), or NULL. */
const em_tokenizer_family *em_tokenizer_family_named(const char *name, size_t len);
/* The families' names, comma-separated ("llama, gpt2"), for messages. */
const char *em_tokenizer_family_names(void);

#endif
