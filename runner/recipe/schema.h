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
/* The same, with keys of node's top-level map that another schema checks (the keys the recipe
 * schema gives every stage: kind, after): they are skipped here and offered as "did you mean"
 * hints for unknown options. */
em_status em_schema_validate_shared(const em_schema *schema, em_node *node, const char *what,
                                    const char *const *shared, size_t shared_count);

/* The property names of the object schema at JSON pointer `pointer` ("#/properties/stages/..."),
 * in schema order, into names (at most max); returns how many there are. The names live as long
 * as the schema. */
size_t em_schema_property_names(const em_schema *schema, const char *pointer, const char **names,
                                size_t max);

/* The number a schema gives as `default` for the property at JSON pointer `pointer`
 * ("#/properties/init_timeout_s"); false when there is none. */
bool em_schema_default_number(const em_schema *schema, const char *pointer, double *out);

/* Checks the options of one stage of kind `kind` (the map of the recipe's stages: entry, `kind`
 * and `after` included) against schemas/stages/<kind>.schema.json, applying its defaults, with
 * the keys that recipe.schema.json gives every stage left to that schema. `what` names the stage
 * in messages ("stage 'wiki'"). Errors have exit status 2 (1 for a missing or broken schema). */
em_status em_schema_validate_stage(em_node *stage, const char *kind, const char *what);

/* The closest of candidates to word (edit distance at most 2, or a shared prefix), or NULL. */
const char *em_did_you_mean(const char *word, const char *const *candidates, size_t count);

#endif
