/* Running a recipe template with a command line's overrides (template_command.h). */
#include "cli/template_command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/resume.h"
#include "runner/pipeline.h"
#include "runner/recipe/recipe.h"
#include "util/log.h"

void em_override_add(em_override_list *l, char *item) {
    if (l->count < sizeof l->items / sizeof *l->items)
        l->items[l->count++] = item;
    else
        free(item);
}

void em_override_list_free(em_override_list *l) {
    for (size_t i = 0; i < l->count; i++) free(l->items[i]);
    l->count = 0;
}

char *em_yaml_quoted(const char *value) {
    char *out = em_xmalloc(4 * strlen(value) + 3), *o = out;
    *o++ = '"';
    for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
        if (*c == '"' || *c == '\\')
            o += sprintf(o, "\\%c", *c);
        else if (*c < 0x20)
            o += sprintf(o, "\\x%02x", *c);
        else
            *o++ = (char)*c;
    }
    strcpy(o, "\"");
    return out;
}

/* The template with the overrides applied, as YAML on stdout. */
static em_status print(em_node *recipe, const em_override_list *overrides) {
    em_status err = NULL;
    for (size_t i = 0; i < overrides->count && !err; i++)
        err = em_recipe_apply_override(recipe, overrides->items[i]);
    if (err) return err;
    printf("# yaml-language-server: $schema=../schemas/recipe.schema.json\n");
    em_node_write_yaml(recipe, stdout);
    return NULL;
}

int em_cli_run_template(const char *template_file, const char *name, em_override_list *overrides,
                        bool print_recipe, em_session_options *opts, int argc, char **argv) {
    em_node *recipe = NULL;
    em_status err = em_recipe_template(template_file, &recipe);
    if (!err && print_recipe) {
        err = print(recipe, overrides);
        em_node_free(recipe);
    } else if (!err) {
        em_pipeline *pipeline = NULL;
        err = em_pipeline_from_tree(recipe, name, (const char *const *)overrides->items,
                                    overrides->count, &pipeline);
        em_override_list_free(overrides);
        em_cli_session_options(opts, argc, argv);
        return em_session_run(err, pipeline, opts);
    }
    em_override_list_free(overrides);
    if (!err) return 0;
    em_log_error("%s", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}
