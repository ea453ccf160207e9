/* Lookup in the tables of embedded files (see embedded.h), and parsing a recipe template. */
#include "runner/recipe/embedded.h"

#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"

static const char *find_in(const em_embedded_file *table, const char *path) {
    for (const em_embedded_file *f = table; f->path; f++)
        if (strcmp(f->path, path) == 0) return f->text;
    return NULL;
}

const char *em_embedded_find(const char *path) {
    return find_in(em_embedded_files, path);
}

const char *em_embedded_recipe(const char *path) {
    return find_in(em_embedded_recipes, path);
}

em_status em_recipe_template(const char *name, em_node **out) {
    *out = NULL;
    const char *text = em_embedded_recipe(name);
    if (!text)
        return em_error_new(EM_EXIT_FAILURE, "no recipe template '%s' is built into evalmesh",
                            name);
    char *where = em_xasprintf("<recipes/%s>", name);
    em_status err = em_yaml_parse(text, strlen(text), where, out);
    free(where);
    if (err) err->exit_code = EM_EXIT_FAILURE;
    return err;
}
