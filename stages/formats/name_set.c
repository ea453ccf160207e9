/* A string set for duplicate detection (see name_set.h). */
#include "stages/formats/name_set.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static uint64_t fnv1a(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

void em_name_set_init(em_name_set *set, uint64_t expected) {
    size_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2;
    set->slots = em_xcalloc(capacity, sizeof *set->slots);
    set->capacity = capacity;
    set->count = 0;
}

static void grow(em_name_set *set) {
    em_name_set bigger;
    em_name_set_init(&bigger, set->capacity);
    for (size_t i = 0; i < set->capacity; i++)
        if (set->slots[i]) em_name_set_add(&bigger, set->slots[i]);
    free(set->slots);
    *set = bigger;
}

bool em_name_set_add(em_name_set *set, const char *name) {
    if (2 * (set->count + 1) > set->capacity) grow(set);
    size_t mask = set->capacity - 1;
    for (size_t i = fnv1a(name) & mask;; i = (i + 1) & mask) {
        if (!set->slots[i]) {
            set->slots[i] = name;
            set->count++;
            return true;
        }
        if (strcmp(set->slots[i], name) == 0) return false;
    }
}

void em_name_set_free(em_name_set *set) {
    free(set->slots);
    set->slots = NULL;
    set->capacity = set->count = 0;
}
