/* Tests of command-line overrides: every form (set, create, delete, YAML-typed values) and
 * every error, with its exact message and exit status 2. */
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"
#include "test.h"

static const char *recipe = "name: demo\n"
                            "seed: 1\n"
                            "list: [a, b]\n"
                            "empty:\n"
                            "stages:\n"
                            "  wiki: {kind: dataset, max_length: 2048, stride: 512}\n";

static em_node *load(void) {
    em_node *n = NULL;
    em_status err = em_yaml_parse(recipe, strlen(recipe), "t.yaml", &n);
    CHECK(err == NULL);
    em_error_free(err);
    return n;
}

static void apply_ok(em_node *root, const char *arg) {
    em_status err = em_recipe_apply_override(root, arg);
    if (err) fprintf(stderr, "override %s: %s\n", arg, err->message);
    CHECK(err == NULL);
    em_error_free(err);
}

static void check_error(const char *arg, const char *message) {
    em_node *root = load();
    em_status err = em_recipe_apply_override(root, arg);
    CHECK(err != NULL);
    if (err) {
        CHECK_STR_EQ(err->message, message);
        CHECK_INT_EQ(err->exit_code, 2);
    }
    em_error_free(err);
    em_node_free(root);
}

static void check_forms(void) {
    em_node *root = load();
    /* a value is YAML: an integer stays an integer, and marks name the command line */
    apply_ok(root, "stages.wiki.max_length=4096");
    const em_map_entry *e = em_node_get_entry(em_node_get_path(root, "stages.wiki"), "max_length");
    CHECK_INT_EQ(em_node_scalar_type(e->value), EM_SCALAR_INT);
    CHECK_STR_EQ(e->value->text, "4096");
    CHECK_STR_EQ(e->value->mark.file, "<command line>");
    CHECK_INT_EQ(e->value->mark.line, 1);
    CHECK_INT_EQ(e->key_mark.line, 6); /* the key keeps its place in the file */
    /* the order of keys is kept when a value is replaced */
    CHECK_STR_EQ(em_node_get_path(root, "stages.wiki")->entries[1].key, "max_length");

    apply_ok(root, "stages.wiki.protocol='4096'");
    CHECK_INT_EQ(em_node_scalar_type(em_node_get_path(root, "stages.wiki.protocol")),
                 EM_SCALAR_STRING);
    apply_ok(root, "seed=7");
    CHECK_INT_EQ(em_node_get_int(root, "seed", 0), 7);
    apply_ok(root, "list=[1, {x: y}]");
    const em_node *list = em_node_get(root, "list");
    CHECK(list->kind == EM_NODE_SEQ && list->count == 2 && list->items[1]->kind == EM_NODE_MAP);
    apply_ok(root, "name=a=b"); /* only the first '=' splits */
    CHECK_STR_EQ(em_node_get_string(root, "name", ""), "a=b");
    apply_ok(root, "name=");
    CHECK(em_node_get(root, "name") && em_node_is_null(em_node_get(root, "name")));
    apply_ok(root, "flag=true");
    CHECK(em_node_get_bool(root, "flag", false));
    CHECK_STR_EQ(root->entries[root->count - 1].key, "flag"); /* new keys go last */

    /* a new stage: the maps on the way are created */
    apply_ok(root, "stages.f.kind=forward");
    apply_ok(root, "stages.f.opts.deep.x=1.5");
    CHECK_STR_EQ(em_node_get_string(em_node_get_path(root, "stages.f"), "kind", ""), "forward");
    CHECK(em_node_get_double(em_node_get_path(root, "stages.f.opts.deep"), "x", 0) == 1.5);
    /* a null on the way becomes a map */
    apply_ok(root, "empty.x=1");
    CHECK_INT_EQ(em_node_get_int(em_node_get(root, "empty"), "x", 0), 1);

    /* deletions */
    apply_ok(root, "~stages.wiki.stride");
    CHECK(em_node_get_path(root, "stages.wiki.stride") == NULL);
    CHECK(em_node_get_path(root, "stages.wiki.kind") != NULL);
    apply_ok(root, "~list");
    CHECK(em_node_get(root, "list") == NULL);
    apply_ok(root, "~stages");
    CHECK(em_node_get(root, "stages") == NULL);
    em_node_free(root);
}

static void check_errors(void) {
    check_error("stages.wiki.stride",
                "override 'stages.wiki.stride' has no '=' (use stages.wiki.stride=VALUE, or "
                "~stages.wiki.stride to delete)");
    check_error("a.b", "override 'a.b' has no '=' (use a.b=VALUE, or ~a.b to delete)");
    check_error("=5", "override '=5' has an empty path (use a.b=VALUE to set a.b)");
    check_error("~", "override '~' has an empty path (use ~a.b to delete a.b)");
    check_error("~seed=3",
                "override '~seed=3': a deletion takes no value (use ~a.b, or a.b=VALUE)");
    check_error("a..b=1", "cannot set 'a..b': the path has an empty key");
    check_error(".a=1", "cannot set '.a': the path has an empty key");
    check_error("a.=1", "cannot set 'a.': the path has an empty key");
    check_error("~a..b", "cannot delete 'a..b': the path has an empty key");
    check_error("name.x=1", "cannot set 'name.x': 'name' is a string (at t.yaml:1:7)");
    check_error("seed.x.y=1", "cannot set 'seed.x.y': 'seed' is an integer (at t.yaml:2:7)");
    check_error("list.x=1", "cannot set 'list.x': 'list' is a list (at t.yaml:3:7)");
    check_error("stages.wiki.kind.x=1",
                "cannot set 'stages.wiki.kind.x': 'stages.wiki.kind' is a string (at t.yaml:6:16)");
    check_error("~name.x", "cannot delete 'name.x': 'name' is a string (at t.yaml:1:7)");
    check_error("~empty.x", "cannot delete 'empty.x': 'empty' is null (at t.yaml:4:7)");
    check_error("~nope", "cannot delete 'nope': there is no such key");
    check_error("~nope.x", "cannot delete 'nope.x': there is no such key");
    check_error("~stages.wiki.nope", "cannot delete 'stages.wiki.nope': there is no such key");
    check_error("seed=[1,", "override 'seed=[1,': <command line>:2:1: did not find expected node "
                            "content (while parsing a flow node at <command line>:2:1)");
    check_error("seed=a: b: c",
                "override 'seed=a: b: c': <command line>:1:5: mapping values are not allowed in "
                "this context");
    check_error("seed=*x", "override 'seed=*x': <command line>:1:1: unknown alias '*x'");
}

int main(void) {
    check_forms();
    check_errors();
    return test_finish();
}
