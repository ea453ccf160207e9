/* The BPE merge table: a hash map from an id pair to its rank and merged id. */
#include "stages/tokenizer/bpe_merges.h"

#include <stdlib.h>

#include "util/error.h"

static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static size_t pair_slot(uint64_t key, size_t capacity) {
    /* SplitMix64's finalizer: every bit of both ids reaches the low bits used as the slot. */
    key ^= key >> 30;
    key *= 0xBF58476D1CE4E5B9ull;
    key ^= key >> 27;
    key *= 0x94D049BB133111EBull;
    key ^= key >> 31;
    return (size_t)key & (capacity - 1);
}

void em_merge_map_init(em_merge_map *map, size_t expected) {
    size_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2;
    map->capacity = capacity;
    map->count = 0;
    map->slots = em_xmalloc(capacity * sizeof(em_merge));
    for (size_t i = 0; i < capacity; i++) map->slots[i].key = UINT64_MAX;
}

bool em_merge_map_add(em_merge_map *map, int32_t left, int32_t right, int32_t rank,
                      int32_t result) {
    uint64_t key = pair_key(left, right);
    size_t i = pair_slot(key, map->capacity);
    while (map->slots[i].key != UINT64_MAX) {
        if (map->slots[i].key == key) return false;
        i = (i + 1) & (map->capacity - 1);
    }
    map->slots[i] = (em_merge){key, rank, result};
    map->count++;
    return true;
}

const em_merge *em_merge_map_find(const em_merge_map *map, int32_t left, int32_t right) {
    if (!map->slots) return NULL;
    uint64_t key = pair_key(left, right);
    size_t i = pair_slot(key, map->capacity);
    while (map->slots[i].key != UINT64_MAX) {
        if (map->slots[i].key == key) return &map->slots[i];
        i = (i + 1) & (map->capacity - 1);
    }
    return NULL;
}

void em_merge_map_free(em_merge_map *map) {
    free(map->slots);
    map->slots = NULL;
    map->capacity = map->count = 0;
}
