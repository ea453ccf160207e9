/* A set of strings (open addressing, FNV-1a), to find duplicate names in O(1) each: GGUF keys and
 * tensor names, safetensors tensor names. The set borrows the strings; they must outlive it. */
#ifndef EVALMESH_NAME_SET_H
#define EVALMESH_NAME_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct em_name_set {
    const char **slots;
    size_t capacity; /* a power of two, at least twice the expected count */
    size_t count;
} em_name_set;

void em_name_set_init(em_name_set *set, uint64_t expected);
/* Adds name; false when it was already there. */
bool em_name_set_add(em_name_set *set, const char *name);
void em_name_set_free(em_name_set *set);

#endif
