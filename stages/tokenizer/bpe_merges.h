/* The merge table of a byte-level BPE tokenizer: for a pair of adjacent token ids, the rank of the
 * merge (lower merges first) and the id of the merged token. Open addressing on the id pair. */
#ifndef EVALMESH_TOKENIZER_BPE_MERGES_H
#define EVALMESH_TOKENIZER_BPE_MERGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct em_merge {
    uint64_t key; /* left id << 32 | right id; UINT64_MAX marks an empty slot */
    int32_t rank;
    int32_t result;
} em_merge;

typedef struct em_merge_map {
    em_merge *slots;
    size_t capacity; /* a power of two */
    size_t count;
} em_merge_map;

void em_merge_map_init(em_merge_map *map, size_t expected);
/* Adds a merge; false (and no change) when the pair already has one. */
bool em_merge_map_add(em_merge_map *map, int32_t left, int32_t right, int32_t rank, int32_t result);
/* The merge of (left, right), or NULL. */
const em_merge *em_merge_map_find(const em_merge_map *map, int32_t left, int32_t right);
void em_merge_map_free(em_merge_map *map);

#endif
