/* Loading a recipe: YAML (libyaml) into an em_node tree with file:line:col on every node,
 * anchors, aliases and merge keys (`<<`) resolved, duplicate keys and tab indentation rejected,
 * `include:` files merged under the including file, and command-line overrides applied. */
#ifndef EVALMESH_RECIPE_H
#define EVALMESH_RECIPE_H

#include "runner/recipe/node.h"

/* Parses one YAML document from text; `name` is the file name used in marks. Errors have exit
 * status 2 and the parser's message with file:line:col. */
em_status em_yaml_parse(const char *text, size_t len, const char *name, em_node **out);
/* Reads and parses a file (a missing or unreadable file is an error naming it). */
em_status em_yaml_load_file(const char *path, em_node **out);

/* Loads a recipe file with its includes resolved: `include: other.yaml` (or a list) names files
 * relative to the including file; their maps are merged depth-first under the includer, whose
 * own keys win. Include cycles are errors showing the chain. */
em_status em_recipe_load(const char *path, em_node **out);

/* Parses the recipe template built into the binary from recipes/<name> (see embedded.h); its
 * marks name "<recipes/NAME>", a file that paths are not relative to. Errors (exit 1: the
 * template is part of evalmesh) name it. */
em_status em_recipe_template(const char *name, em_node **out);

/* Applies one command-line override to root:
 *   a.b.c=VALUE  sets the value (VALUE parsed as YAML, so 4096 is an int and [1,2] a list),
 *                creating maps on the way;
 *   ~a.b.c       deletes the key.
 * Errors (exit 2) for a missing '=', an empty path, or a path through a scalar or list. */
em_status em_recipe_apply_override(em_node *root, const char *override_arg);

#endif
