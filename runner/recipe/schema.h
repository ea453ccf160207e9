/* A JSON Schema (draft 2020-12) validator for the subset evalmesh's schemas use: type,
 * properties, required, additionalProperties, enum, const, minimum/maximum (and exclusive),
 * minLength, pattern, items, minItems, oneOf, anyOf, default, description. It checks an em_node
 * tree in place, applying `default`s of absent properties, and reports the first violation with
 * the node's file:line:col (unknown keys get a "did you mean" when a known key is close). */
#ifndef EVALMESH_SCHEMA_H
#define EVALMESH_SCHEMA_H

#include "runner/recipe/node.h"

typedef struct em_schema em_schema;

/* Parses schema text (JSON); `name` is used in errors about the schema itself. */
em_status em_schema_parse(const char *json_text, const char *name, em_schema **out);
/* Loads an embedded schema by its path under schemas/, e.g. "stages/mesh.schema.json". */
em_status em_schema_load_embedded(const char *path, em_schema **out);
void em_schema_free(em_schema *schema);

/* Validates node against schema, filling in defaults; `what` names the node in messages
 * (e.g. "stage 'wiki'"). Errors have exit status 2. */
em_status em_schema_validate(const em_schema *schema, em_node *node, const char *what);

/* The closest of candidates to word (edit distance at most 2, or a shared prefix), or NULL. */
const char *em_did_you_mean(const char *word, const char *const *candidates, size_t count);

#endif
