/* A cache from words (byte strings) to the token ids they encode to, kept for one encode call:
 * natural text repeats its words, so each distinct word is merged once. Open addressing over
 * entries whose bytes and ids live in two arenas; past a size limit it starts over. */
#ifndef EVALMESH_TOKENIZER_WORD_CACHE_H
#define EVALMESH_TOKENIZER_WORD_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct em_word_cache_entry {
    uint64_t hash;
    size_t word, word_len; /* into the byte arena; word_len 0 marks an empty slot */
    size_t ids, n_ids;     /* into the id arena */
} em_word_cache_entry;

typedef struct em_word_cache {
    em_word_cache_entry *slots;
    size_t capacity, count;
    char *bytes;
    size_t bytes_len, bytes_capacity;
    int32_t *ids;
    size_t ids_len, ids_capacity;
} em_word_cache;

/* The ids of a non-empty word (*n_ids of them), or NULL when it is not cached. */
const int32_t *em_word_cache_get(const em_word_cache *c, const char *word, size_t len,
                                 uint64_t hash, size_t *n_ids);
void em_word_cache_put(em_word_cache *c, const char *word, size_t len, uint64_t hash,
                       const int32_t *ids, size_t n_ids);
void em_word_cache_free(em_word_cache *c);

#endif
