/* The recipe document: a tree of maps, sequences and scalars, each node carrying the place
 * (file:line:col) it came from so every error can point at it. Produced by the YAML loader,
 * changed by includes and command-line overrides, checked and completed by the schema
 * validator, and read by the stages through the typed getters below.
 *
 * Scalars keep their text and whether they were quoted; their type follows the YAML 1.2 core
 * schema: plain `null`/`~`/empty is null, `true`/`false` a bool, decimal/0x/0o integers an int,
 * decimal floats (and .inf/.nan) a float, everything else (and anything quoted) a string. */
#ifndef EVALMESH_NODE_H
#define EVALMESH_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/error.h"

typedef enum em_node_kind {
    EM_NODE_SCALAR,
    EM_NODE_MAP,
    EM_NODE_SEQ,
} em_node_kind;

/* What a scalar means under the core schema (see em_node_scalar_type). */
typedef enum em_scalar_type {
    EM_SCALAR_NULL,
    EM_SCALAR_BOOL,
    EM_SCALAR_INT,
    EM_SCALAR_FLOAT,
    EM_SCALAR_STRING,
} em_scalar_type;

typedef struct em_node em_node;

typedef struct em_map_entry {
    char *key;
    em_mark key_mark;
    em_node *value;
} em_map_entry;

struct em_node {
    em_node_kind kind;
    em_mark mark;
    /* EM_NODE_SCALAR */
    char *text;
    bool quoted;
    /* EM_NODE_MAP: entries in document order, keys unique */
    em_map_entry *entries;
    /* EM_NODE_SEQ */
    em_node **items;
    size_t count; /* number of entries or items */
};

/* Construction (the node owns everything below it). */
em_node *em_node_new_scalar(const char *text, bool quoted, em_mark mark);
em_node *em_node_new_map(em_mark mark);
em_node *em_node_new_seq(em_mark mark);
/* Adds or replaces key in map (the old value is freed); map takes value. */
void em_node_map_set(em_node *map, const char *key, em_mark key_mark, em_node *value);
/* Removes key; returns whether it was there. */
bool em_node_map_remove(em_node *map, const char *key);
void em_node_seq_append(em_node *seq, em_node *item);
em_node *em_node_clone(const em_node *node);
void em_node_free(em_node *node);

/* Lookup. em_node_get returns NULL when map is not a map or has no such key. */
em_node *em_node_get(const em_node *map, const char *key);
const em_map_entry *em_node_get_entry(const em_node *map, const char *key);
/* Follows a dotted path ("stages.wiki.max_length"); NULL when absent. */
em_node *em_node_get_path(const em_node *root, const char *dotted_path);

/* Scalars. */
em_scalar_type em_node_scalar_type(const em_node *node);
bool em_node_is_null(const em_node *node); /* NULL pointer or a null scalar */
/* Typed getters: an error naming the node's place when the node has another type. */
em_status em_node_as_bool(const em_node *node, bool *out);
em_status em_node_as_int(const em_node *node, int64_t *out);
em_status em_node_as_double(const em_node *node, double *out);      /* ints are accepted too */
em_status em_node_as_string(const em_node *node, const char **out); /* any non-null scalar */

/* Convenience getters on a map's key with a fallback when the key is absent or null. */
bool em_node_get_bool(const em_node *map, const char *key, bool fallback);
int64_t em_node_get_int(const em_node *map, const char *key, int64_t fallback);
double em_node_get_double(const em_node *map, const char *key, double fallback);
const char *em_node_get_string(const em_node *map, const char *key, const char *fallback);

/* Getters for options a schema has checked: the key is required or has a `default` there, so it
 * is present with the right type. Defaults live in the schemas only; a missing value is a bug in
 * evalmesh (a schema without the default): it is printed and the process exits with status 1. */
bool em_node_option_bool(const em_node *map, const char *key);
int64_t em_node_option_int(const em_node *map, const char *key);
double em_node_option_double(const em_node *map, const char *key);
const char *em_node_option_string(const em_node *map, const char *key);

/* A path the scalar `node` gives, resolved against the recipe file it was written in (the rule
 * of util/paths.h). The caller frees the result. */
char *em_node_path(const em_node *node);

/* A word for error messages: "a map", "a list", "a string", "an integer", ... */
const char *em_node_type_name(const em_node *node);
/* The type and, for scalars, the value, for "found ..." in messages: `a string "abc"`,
 * `an integer 5`, `a map`, `null`. The caller frees the result. */
char *em_node_describe(const em_node *node);

/* Writes the tree as block YAML (strings quoted when needed so it loads back the same). */
void em_node_write_yaml(const em_node *node, FILE *out);
/* Writes the tree as JSON (scalars by their core-schema type). */
void em_node_write_json(const em_node *node, FILE *out);

#endif
