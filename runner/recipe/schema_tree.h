/* Inside the schema validator: a loaded schema is its cJSON tree, already checked to use only
 * the keywords the validator knows (see schema.c), and `$ref`s are JSON pointers into it. */
#ifndef EVALMESH_SCHEMA_TREE_H
#define EVALMESH_SCHEMA_TREE_H

#include <cjson/cJSON.h>
#include <regex.h>

#include "runner/recipe/schema.h"

struct em_schema {
    cJSON *root;
    char *name; /* for messages about the schema itself */
};

/* The schema a "$ref" names ("#" or "#/$defs/x", a JSON pointer into root), or NULL. */
const cJSON *em_schema_resolve_ref(const cJSON *root, const char *ref);

/* Compiles a JSON Schema (ECMA-262) pattern as a POSIX extended regex, translating the
 * escapes \d \w \s; returns regcomp's status (0 on success). */
int em_schema_compile_pattern(const char *pattern, regex_t *re);

#endif
