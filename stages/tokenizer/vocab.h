/* A tokenizer vocabulary: for each id its text as the tokenizer file spells it, the bytes it
 * decodes to, its score (SentencePiece) and its type, plus two hash maps to find an id from a text
 * or from decoded bytes. Both tokenizer families share it. */
#ifndef EVALMESH_TOKENIZER_VOCAB_H
#define EVALMESH_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Token types as GGUF's tokenizer.ggml.token_type stores them (llama.cpp's numbering). */
typedef enum em_token_type {
    EM_TOKEN_UNDEFINED = 0,
    EM_TOKEN_NORMAL = 1,
    EM_TOKEN_UNKNOWN = 2,
    EM_TOKEN_CONTROL = 3,
    EM_TOKEN_USER_DEFINED = 4,
    EM_TOKEN_UNUSED = 5,
    EM_TOKEN_BYTE = 6,
} em_token_type;

/* A byte string that is not NUL-terminated. */
typedef struct em_bytes {
    const char *data;
    uint32_t len;
} em_bytes;

/* Open addressing map from a byte string to a token id; the strings are borrowed from the vocab.
 * Each slot keeps part of its key's hash, so most mismatches cost no string comparison. */
typedef struct em_text_slot {
    int32_t id; /* -1: empty */
    uint32_t hash;
} em_text_slot;

typedef struct em_text_map {
    em_text_slot *slots; /* capacity is a power of two */
    size_t capacity;
    const em_bytes *keys; /* keys[id] is the string of id */
} em_text_map;

typedef struct em_vocab {
    int32_t n_tokens;
    em_bytes *text;   /* text[id]: as in the file ("▁the", "Ġthe", "<0x0A>", "<|eot_id|>") */
    em_bytes *pieces; /* pieces[id]: the bytes the token decodes to (" the", "\n", ...) */
    float *scores;    /* n_tokens entries (0 when the file has none) */
    uint8_t *types;   /* em_token_type */
    em_text_map by_text;
    em_text_map by_piece; /* normal tokens by decoded bytes (byte-level BPE only; else empty) */
    char *storage;        /* owns the text and piece bytes */
} em_vocab;

uint64_t em_bytes_hash(const char *data, size_t len);

/* Fills a text map over keys[0..n). Later duplicates do not replace earlier ids. */
void em_text_map_build(em_text_map *map, const em_bytes *keys, int32_t n, const uint8_t *types,
                       bool normal_only);
/* The id whose key equals data[0..len), or -1. */
int32_t em_text_map_find(const em_text_map *map, const char *data, size_t len);
void em_text_map_free(em_text_map *map);

void em_vocab_free(em_vocab *vocab);

#endif
