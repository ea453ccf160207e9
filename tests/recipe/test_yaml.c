/* Tests of the YAML loader: marks, anchors and aliases, merge keys, and one exact message (with
 * file:line:col and exit status 2) for each kind of bad YAML. */
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"
#include "recipe_test_util.h"
#include "test.h"

static char files_dir[4096];

static const char *file_path(const char *name) {
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", files_dir, name);
    return path;
}

/* Parses text and checks that it fails with exactly `message` and exit status 2. */
static void check_parse_error(const char *text, const char *message) {
    em_node *n = NULL;
    em_status err = em_yaml_parse(text, strlen(text), "t.yaml", &n);
    CHECK(err != NULL);
    CHECK(n == NULL);
    if (!err) return;
    CHECK_STR_EQ(err->message, message);
    CHECK_INT_EQ(err->exit_code, 2);
    em_error_free(err);
}

/* Loads a file of files/ as a recipe and checks the error; each "@" in `message` stands for
 * the file's path. */
static void check_file_error(const char *name, const char *message) {
    char expected[8192] = "";
    for (const char *m = message; *m; m++) {
        size_t len = strlen(expected);
        if (*m == '@')
            snprintf(expected + len, sizeof expected - len, "%s", file_path(name));
        else
            snprintf(expected + len, sizeof expected - len, "%c", *m);
    }
    em_node *n = NULL;
    em_status err = em_recipe_load(file_path(name), &n);
    CHECK(err != NULL);
    CHECK(n == NULL);
    if (!err) return;
    CHECK_STR_EQ(err->message, expected);
    CHECK_INT_EQ(err->exit_code, 2);
    em_error_free(err);
}

static void check_marks(void) {
    em_node *n = parse("# comment\nname: demo\nstages:\n  wiki:\n    stride: [1, 2]\n");
    CHECK(n && n->kind == EM_NODE_MAP);
    const em_map_entry *e = em_node_get_entry(em_node_get_path(n, "stages.wiki"), "stride");
    CHECK(e != NULL);
    if (e) {
        CHECK_STR_EQ(e->key_mark.file, "t.yaml");
        CHECK_INT_EQ(e->key_mark.line, 5);
        CHECK_INT_EQ(e->key_mark.col, 5);
        CHECK_INT_EQ(e->value->mark.line, 5);
        CHECK_INT_EQ(e->value->mark.col, 13);
        CHECK_INT_EQ(e->value->items[1]->mark.col, 17);
    }
    /* a plain scalar is typed, a quoted or block one is a string */
    em_node_free(n);
    n = parse("a: 12\nb: '12'\nc: \"12\"\nd: |\n  12\ne: !!str 12\nf:\n");
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "a")), EM_SCALAR_INT);
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "b")), EM_SCALAR_STRING);
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "c")), EM_SCALAR_STRING);
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "d")), EM_SCALAR_STRING);
    CHECK_STR_EQ(em_node_get(n, "d")->text, "12\n");
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "e")), EM_SCALAR_STRING);
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "f")), EM_SCALAR_NULL);
    em_node_free(n);
    /* any top-level node is fine for em_yaml_parse (override values use it) */
    n = parse("4096");
    CHECK(n && n->kind == EM_NODE_SCALAR && strcmp(n->text, "4096") == 0);
    em_node_free(n);
}

static void check_anchors_and_merges(void) {
    em_node *n = NULL;
    em_status err = em_recipe_load(file_path("anchors.yaml"), &n);
    CHECK(err == NULL);
    em_error_free(err);
    if (!n) return;
    /* explicit keys win over merged ones, wherever they stand; merged keys take the place
     * of the `<<` key */
    const em_node *wiki = em_node_get_path(n, "stages.wiki");
    CHECK_INT_EQ(wiki->count, 4);
    CHECK_STR_EQ(wiki->entries[0].key, "max_length");
    CHECK_STR_EQ(wiki->entries[1].key, "protocol");
    CHECK_STR_EQ(wiki->entries[2].key, "kind");
    CHECK_STR_EQ(wiki->entries[3].key, "stride");
    CHECK_INT_EQ(em_node_get_int(wiki, "stride", 0), 1024);
    CHECK_INT_EQ(em_node_get_int(wiki, "max_length", 0), 2048);
    /* merged values keep the place they were written (the anchored map) */
    CHECK_INT_EQ(em_node_get(wiki, "max_length")->mark.line, 3);
    /* in a list of maps the earlier map wins */
    const em_node *both = em_node_get_path(n, "stages.both");
    CHECK_INT_EQ(both->count, 5);
    CHECK_INT_EQ(em_node_get_int(both, "stride", 0), 256);
    CHECK_STR_EQ(em_node_get_string(both, "protocol", ""), "rolling");
    CHECK_INT_EQ(em_node_get_int(both, "max_length", 0), 2048);
    CHECK(em_node_get_bool(both, "extra", false));
    /* an alias is a copy of the anchored node */
    const em_node *copy = em_node_get_path(n, "stages.copy");
    CHECK(copy && copy->kind == EM_NODE_MAP && copy->count == 3);
    CHECK(copy != em_node_get(n, "defaults"));
    const em_node *again = em_node_get(n, "again");
    CHECK(again && again->kind == EM_NODE_SEQ && again->count == 2);
    CHECK_STR_EQ(again->items[1]->text, "2");
    em_node_free(n);

    /* a redefined anchor shadows the older one from there on */
    n = parse("a: &x 1\nb: *x\nc: &x 2\nd: *x\n");
    CHECK_INT_EQ(em_node_get_int(n, "b", 0), 1);
    CHECK_INT_EQ(em_node_get_int(n, "d", 0), 2);
    em_node_free(n);
    /* a merge key inside a merged anchor is resolved before it is copied */
    n = parse("a: &a {x: 1}\nb: &b {<<: *a, y: 2}\nc: {<<: *b, z: 3}\n");
    const em_node *c = em_node_get(n, "c");
    CHECK_INT_EQ(c ? c->count : 0, 3);
    CHECK_INT_EQ(em_node_get_int(c, "x", 0), 1);
    em_node_free(n);
    /* a quoted "<<" is an ordinary key */
    n = parse("\"<<\": {a: 1}\n");
    CHECK(em_node_get(n, "<<") != NULL);
    em_node_free(n);
}

static void check_bad_yaml(void) {
    check_parse_error("a: *nope\n", "t.yaml:1:4: unknown alias '*nope'");
    check_parse_error("a: &x [1, *x]\n", "t.yaml:1:11: alias '*x' is inside the node it refers to");
    check_parse_error(
        "a: 1\n<<: 2\n",
        "t.yaml:2:5: merge key '<<' needs a map or a list of maps, found an integer 2");
    check_parse_error("a: {x: 1}\nb:\n  <<: [*a, 3]\n", "t.yaml:3:8: unknown alias '*a'");
    check_parse_error("a: &a {x: 1}\nb:\n  <<: [*a, 3]\n",
                      "t.yaml:3:7: merge key '<<' needs a map or a list of maps, found a list");
    check_parse_error("a: &a {x: 1}\nb:\n  <<: *a\n  <<: *a\n",
                      "t.yaml:4:3: duplicate key '<<' (first defined at t.yaml:3:3)");
    check_parse_error("? [a, b]\n: 1\n",
                      "t.yaml:1:3: a key must be a non-empty scalar, found a list");
    check_parse_error("\"\": 1\n",
                      "t.yaml:1:1: a key must be a non-empty scalar, found an empty one");
    check_parse_error("a: !custom 1\n",
                      "t.yaml:1:4: unsupported tag '!custom' (only !!str is allowed)");
    check_parse_error("a:\n  b: 1\n  b: 2\n",
                      "t.yaml:3:3: duplicate key 'b' (first defined at t.yaml:2:3)");
    check_parse_error("a: {b: 1, b: 2}\n",
                      "t.yaml:1:11: duplicate key 'b' (first defined at t.yaml:1:5)");
    check_parse_error("a:\n  b: 1\n\tc: 2\n",
                      "t.yaml:3:1: tab character in indentation (use spaces)");
    check_parse_error("a:\n    \tb: 1\n", "t.yaml:2:5: tab character in indentation (use spaces)");
    check_parse_error("a: \"open\n", "t.yaml:2:1: found unexpected end of stream "
                                     "(while scanning a quoted scalar at t.yaml:1:4)");
    check_parse_error("a: [1, 2\n", "t.yaml:2:1: did not find expected ',' or ']' "
                                    "(while parsing a flow sequence at t.yaml:1:4)");
    check_parse_error("a: @b\n", "t.yaml:1:4: found character that cannot start any token "
                                 "(while scanning for the next token at t.yaml:1:4)");
    check_parse_error("a: \"\\q\"\n", "t.yaml:1:5: found unknown escape character "
                                      "(while parsing a quoted scalar at t.yaml:1:4)");
    check_parse_error("a: 1\n b: 2\n",
                      "t.yaml:2:3: mapping values are not allowed in this context");
    check_parse_error("a: 1\n\xff: 2\n", "t.yaml:2:1: invalid leading UTF-8 octet");
    check_parse_error("", "t.yaml: empty recipe");
    check_parse_error("a: 1\n---\nb: 2\n",
                      "t.yaml:2:1: a second YAML document (a recipe is one document; "
                      "remove the '---')");
    /* deep aliases cannot expand into an enormous tree */
    check_parse_error(
        "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
        "t.yaml:5:60: too many nodes (aliases expand the document past 1048576 nodes)");
}

/* Nesting deeper than the loader allows is one clear error, not a stack overflow. */
static void check_deep_nesting(void) {
    size_t depth = 100000;
    char *text = em_xmalloc(2 * depth + 1);
    memset(text, '[', depth);
    memset(text + depth, ']', depth);
    text[2 * depth] = '\0';
    check_parse_error(text, "t.yaml:1:257: maps and lists nested more than 256 deep");
    free(text);
    em_node *n = NULL;
    em_status err = em_yaml_parse("[[[[1]]]]", 9, "t.yaml", &n);
    CHECK(err == NULL && n && n->items[0]->items[0]->items[0]->items[0]->text[0] == '1');
    em_error_free(err);
    em_node_free(n);
}

static void check_bad_files(void) {
    check_file_error("tab_indent.yaml", "@:4:1: tab character in indentation (use spaces)");
    check_file_error("malformed_indent.yaml", "@:6:4: did not find expected key (while parsing a "
                                              "block mapping at @:4:3)");
    check_file_error("malformed_flow.yaml", "@:5:4: did not find expected ',' or '}' (while "
                                            "parsing a flow mapping at @:4:6)");
    check_file_error("two_docs.yaml",
                     "@:3:1: a second YAML document (a recipe is one document; remove the '---')");
    check_file_error("empty.yaml", "@: empty recipe");
    check_file_error("comment_only.yaml", "@: empty recipe");
    check_file_error("duplicate_key.yaml", "@:5:1: duplicate key 'seed' (first defined at @:3:1)");
    check_file_error("top_list.yaml",
                     "@:2:1: the top level of a recipe must be a map of keys, found a list");
    em_node *n = NULL;
    em_status err = em_recipe_load(file_path("no_such_file.yaml"), &n);
    char *expected =
        em_xasprintf("cannot read '%s': No such file or directory", file_path("no_such_file.yaml"));
    CHECK_STR_EQ(err ? err->message : NULL, expected);
    CHECK_INT_EQ(err ? err->exit_code : 0, 2);
    free(expected);
    em_error_free(err);
    err = em_recipe_load(files_dir, &n);
    expected =
        em_xasprintf("cannot read '%s': it is a directory, not a regular file (a recipe must "
                     "be one)",
                     files_dir);
    CHECK_STR_EQ(err ? err->message : NULL, expected);
    free(expected);
    em_error_free(err);
}

int main(void) {
    const char *src = getenv("EVALMESH_SOURCE_DIR");
    if (!src) TEST_SKIP("EVALMESH_SOURCE_DIR is not set (run through ctest)");
    snprintf(files_dir, sizeof files_dir, "%s/tests/recipe/files", src);
    check_marks();
    check_anchors_and_merges();
    check_bad_yaml();
    check_deep_nesting();
    check_bad_files();
    return test_finish();
}
