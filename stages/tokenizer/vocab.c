/* The vocabulary's hash maps (open addressing with linear probing, FNV-1a) and its cleanup. */
#include "stages/tokenizer/vocab.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

uint64_t em_bytes_hash(const char *data, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)data[i];
        h *= 1099511628211ull;
    }
    return h;
}

void em_text_map_build(em_text_map *map, const em_bytes *keys, int32_t n, const uint8_t *types,
                       bool normal_only) {
    size_t capacity = 16;
    while (capacity < 2 * (size_t)n) capacity *= 2;
    map->capacity = capacity;
    map->keys = keys;
    map->slots = em_xmalloc(capacity * sizeof(em_text_slot));
    for (size_t i = 0; i < capacity; i++) map->slots[i].id = -1;
    for (int32_t id = 0; id < n; id++) {
        if (normal_only && types[id] != EM_TOKEN_NORMAL) continue;
        if (em_text_map_find(map, keys[id].data, keys[id].len) >= 0) continue;
        uint64_t h = em_bytes_hash(keys[id].data, keys[id].len);
        size_t i = h & (capacity - 1);
        while (map->slots[i].id >= 0) i = (i + 1) & (capacity - 1);
        map->slots[i] = (em_text_slot){id, (uint32_t)(h >> 32)};
    }
}

int32_t em_text_map_find(const em_text_map *map, const char *data, size_t len) {
    if (!map->slots) return -1;
    uint64_t h = em_bytes_hash(data, len);
    for (size_t i = h & (map->capacity - 1);; i = (i + 1) & (map->capacity - 1)) {
        const em_text_slot *s = &map->slots[i];
        if (s->id < 0) return -1;
        if (s->hash != (uint32_t)(h >> 32)) continue;
        const em_bytes *k = &map->keys[s->id];
        if (k->len == len && memcmp(k->data, data, len) == 0) return s->id;
    }
}

void em_text_map_free(em_text_map *map) {
    free(map->slots);
    map->slots = NULL;
}

void em_vocab_free(em_vocab *vocab) {
    em_text_map_free(&vocab->by_text);
    em_text_map_free(&vocab->by_piece);
    free(vocab->text);
    free(vocab->pieces);
    free(vocab->scores);
    free(vocab->types);
    free(vocab->storage);
    memset(vocab, 0, sizeof(*vocab));
}
