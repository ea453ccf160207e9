/* libFuzzer target for recipe loading: any bytes either load or give an error, never a crash;
 * a loaded tree written as YAML loads back as the same tree; the JSON writer, the schema
 * validator (recipe.schema.json) and an override taken from the input's first line run on it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"
#include "runner/recipe/schema.h"

/* Same kinds, keys and scalar types; null scalars match whatever their spelling. */
static bool same_tree(const em_node *a, const em_node *b) {
    if (a->kind != b->kind || a->count != b->count) return false;
    if (a->kind == EM_NODE_SCALAR) {
        em_scalar_type t = em_node_scalar_type(a);
        return t == em_node_scalar_type(b) && (t == EM_SCALAR_NULL || !strcmp(a->text, b->text));
    }
    for (size_t i = 0; i < a->count; i++) {
        if (a->kind == EM_NODE_MAP && (strcmp(a->entries[i].key, b->entries[i].key) != 0 ||
                                       !same_tree(a->entries[i].value, b->entries[i].value)))
            return false;
        if (a->kind == EM_NODE_SEQ && !same_tree(a->items[i], b->items[i])) return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    em_node *tree = NULL;
    em_status err = em_yaml_parse((const char *)data, size, "fuzz.yaml", &tree);
    if (err) {
        if (!err->message[0] || err->exit_code != EM_EXIT_BAD_INPUT) abort();
        em_error_free(err);
        return 0;
    }
    char *yaml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&yaml, &len);
    em_node_write_yaml(tree, f);
    fclose(f);
    em_node *again = NULL;
    err = em_yaml_parse(yaml, len, "written.yaml", &again);
    if (err) {
        fprintf(stderr, "written YAML does not load: %s\n%s\n", err->message, yaml);
        abort();
    }
    if (!same_tree(tree, again)) {
        fprintf(stderr, "written YAML loads as another tree:\n%s\n", yaml);
        abort();
    }
    free(yaml);
    em_node_free(again);

    f = fopen("/dev/null", "w");
    em_node_write_json(tree, f);
    fclose(f);

    if (tree->kind == EM_NODE_MAP) {
        em_schema *schema = NULL;
        em_status serr = em_schema_load_embedded("recipe.schema.json", &schema);
        if (!serr) em_error_free(em_schema_validate(schema, tree, "recipe"));
        em_error_free(serr);
        em_schema_free(schema);
        size_t n = 0;
        while (n < size && n < 200 && data[n] != '\n' && data[n] != '\0') n++;
        char *arg = strndup((const char *)data, n);
        em_error_free(em_recipe_apply_override(tree, arg));
        free(arg);
    }
    em_node_free(tree);
    return 0;
}
