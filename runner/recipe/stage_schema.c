/* A stage's options against its kind's schema. The keys every stage has (`kind`, `after`) are
 * declared once, in recipe.schema.json (#/properties/stages/additionalProperties), which checks
 * them for every stage; the kind's schema checks the rest and fills in its defaults. */
#include <stdlib.h>

#include "runner/recipe/schema.h"

enum { MAX_SHARED_KEYS = 16 };

/* A missing or broken built-in schema is a bug in evalmesh (exit status 1). */
static em_status load(const char *path, em_schema **out) {
    em_status err = em_schema_load_embedded(path, out);
    if (err) err->exit_code = EM_EXIT_FAILURE;
    return err;
}

em_status em_schema_validate_stage(em_node *stage, const char *kind, const char *what) {
    em_schema *recipe, *own;
    em_status err = load("recipe.schema.json", &recipe);
    if (err) return err;
    char *path = em_xasprintf("stages/%s.schema.json", kind);
    err = load(path, &own);
    free(path);
    if (!err) {
        const char *shared[MAX_SHARED_KEYS];
        size_t n = em_schema_property_names(recipe, "#/properties/stages/additionalProperties",
                                            shared, MAX_SHARED_KEYS);
        if (n > MAX_SHARED_KEYS) n = MAX_SHARED_KEYS;
        err = em_schema_validate_shared(own, stage, what, shared, n);
        em_schema_free(own);
    }
    em_schema_free(recipe);
    return err;
}
