/* What the commands built on a recipe template share (evalmesh perplexity, evalmesh eval): the
 * overrides their options make, as a list; a value quoted as a YAML string; and running the
 * template with them (or printing it filled in, --print-recipe) like `evalmesh run`. */
#ifndef EVALMESH_CLI_TEMPLATE_COMMAND_H
#define EVALMESH_CLI_TEMPLATE_COMMAND_H

#include <stdbool.h>
#include <stddef.h>

#include "runner/session.h"

/* The overrides a command line makes ("PATH=VALUE"), in order; each malloc'd. */
typedef struct em_override_list {
    char *items[32];
    size_t count;
} em_override_list;

/* Appends item (taking it over). */
void em_override_add(em_override_list *l, char *item);
void em_override_list_free(em_override_list *l);

/* value as a YAML double-quoted string, so any file name stays a string (malloc'd). */
char *em_yaml_quoted(const char *value);

/* Loads the built-in recipe template, applies the overrides and either prints the result as
 * YAML (print_recipe) or runs it as pipeline `name` with the session options (argc, argv for
 * the run's invocation record). Frees the overrides; returns the exit status. */
int em_cli_run_template(const char *template_file, const char *name, em_override_list *overrides,
                        bool print_recipe, em_session_options *opts, int argc, char **argv);

#endif
