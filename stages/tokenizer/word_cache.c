/* The per-call word cache of the tokenizers. */
#include "stages/tokenizer/word_cache.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Past this many bytes of cached words the cache starts over (it is only a speed-up). */
#define CACHE_MAX_BYTES (64u << 20)

static em_word_cache_entry *slot(const em_word_cache *c, const char *word, size_t len,
                                 uint64_t hash) {
    size_t i = hash & (c->capacity - 1);
    for (;;) {
        em_word_cache_entry *e = &c->slots[i];
        if (e->word_len == 0) return e;
        if (e->hash == hash && e->word_len == len && memcmp(c->bytes + e->word, word, len) == 0)
            return e;
        i = (i + 1) & (c->capacity - 1);
    }
}

const int32_t *em_word_cache_get(const em_word_cache *c, const char *word, size_t len,
                                 uint64_t hash, size_t *n_ids) {
    if (!c->capacity) return NULL;
    const em_word_cache_entry *e = slot(c, word, len, hash);
    if (!e->word_len) return NULL;
    *n_ids = e->n_ids;
    return c->ids + e->ids;
}

static void clear(em_word_cache *c) {
    free(c->slots);
    c->slots = NULL;
    c->capacity = c->count = 0;
    c->bytes_len = c->ids_len = 0;
}

static void grow(em_word_cache *c) {
    em_word_cache_entry *old = c->slots;
    size_t old_capacity = c->capacity;
    c->capacity = old_capacity ? 2 * old_capacity : 1024;
    c->slots = em_xcalloc(c->capacity, sizeof(em_word_cache_entry));
    for (size_t i = 0; i < old_capacity; i++) {
        if (old[i].word_len == 0) continue;
        size_t j = old[i].hash & (c->capacity - 1);
        while (c->slots[j].word_len) j = (j + 1) & (c->capacity - 1);
        c->slots[j] = old[i];
    }
    free(old);
}

void em_word_cache_put(em_word_cache *c, const char *word, size_t len, uint64_t hash,
                       const int32_t *ids, size_t n_ids) {
    if (c->bytes_len + len > CACHE_MAX_BYTES) clear(c);
    if (2 * (c->count + 1) > c->capacity) grow(c);
    em_word_cache_entry *e = slot(c, word, len, hash);
    if (c->bytes_len + len > c->bytes_capacity) {
        c->bytes_capacity = 2 * (c->bytes_len + len) + 4096;
        c->bytes = em_xrealloc(c->bytes, c->bytes_capacity);
    }
    if (c->ids_len + n_ids > c->ids_capacity) {
        c->ids_capacity = 2 * (c->ids_len + n_ids) + 1024;
        c->ids = em_xrealloc(c->ids, c->ids_capacity * sizeof(int32_t));
    }
    memcpy(c->bytes + c->bytes_len, word, len);
    memcpy(c->ids + c->ids_len, ids, n_ids * sizeof(int32_t));
    *e = (em_word_cache_entry){hash, c->bytes_len, len, c->ids_len, n_ids};
    c->bytes_len += len;
    c->ids_len += n_ids;
    c->count++;
}

void em_word_cache_free(em_word_cache *c) {
    clear(c);
    free(c->bytes);
    free(c->ids);
    memset(c, 0, sizeof(*c));
}
