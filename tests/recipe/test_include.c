/* Tests of `include:`: paths relative to the including file, nested includes, which file wins
 * when keys collide, and the errors for cycles, missing files and bad include entries. */
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"
#include "test.h"

static char files_dir[4096];

static char *file_path(const char *name) {
    return em_xasprintf("%s/%s", files_dir, name);
}

/* Loads files/<name> and checks the error; each "@" in message stands for files_dir. */
static void check_error(const char *name, const char *message) {
    char expected[8192] = "";
    for (const char *m = message; *m; m++) {
        size_t len = strlen(expected);
        if (*m == '@')
            snprintf(expected + len, sizeof expected - len, "%s", files_dir);
        else
            snprintf(expected + len, sizeof expected - len, "%c", *m);
    }
    char *path = file_path(name);
    em_node *n = NULL;
    em_status err = em_recipe_load(path, &n);
    CHECK(err != NULL);
    CHECK(n == NULL);
    if (err) {
        CHECK_STR_EQ(err->message, expected);
        CHECK_INT_EQ(err->exit_code, 2);
    }
    em_error_free(err);
    free(path);
}

static void check_merge(void) {
    char *path = file_path("inc_top.yaml");
    em_node *n = NULL;
    em_status err = em_recipe_load(path, &n);
    CHECK(err == NULL);
    em_error_free(err);
    free(path);
    if (!n) return;
    /* the includer wins over its includes */
    CHECK_STR_EQ(em_node_get_string(n, "name", ""), "top");
    CHECK_INT_EQ(em_node_get_int(em_node_get_path(n, "stages.data"), "max_length", 0), 2048);
    /* a later include wins over an earlier one, and a file over what it includes */
    CHECK_INT_EQ(em_node_get_int(n, "seed", 0), 3);
    CHECK_STR_EQ(em_node_get_string(em_node_get_path(n, "stages.model"), "path", ""), "other.gguf");
    CHECK_INT_EQ(em_node_get_int(em_node_get_path(n, "stages.data"), "stride", 0), 256);
    /* maps are merged key by key, so what nobody overrode stays */
    CHECK_STR_EQ(em_node_get_string(em_node_get_path(n, "stages.data"), "kind", ""), "dataset");
    CHECK_STR_EQ(em_node_get_string(em_node_get_path(n, "stages.model"), "kind", ""), "model");
    CHECK(em_node_get(n, "extra") && em_node_get(n, "extra")->count == 1);
    /* the include key is gone, at every level */
    CHECK(em_node_get(n, "include") == NULL);
    /* the order: the deepest file's keys first, then what later files added */
    CHECK_INT_EQ(n->count, 4);
    CHECK_STR_EQ(n->entries[0].key, "name");
    CHECK_STR_EQ(n->entries[1].key, "seed");
    CHECK_STR_EQ(n->entries[2].key, "stages");
    CHECK_STR_EQ(n->entries[3].key, "extra");
    /* every value keeps the file it came from */
    const em_map_entry *stride = em_node_get_entry(em_node_get_path(n, "stages.data"), "stride");
    CHECK(stride && strstr(stride->value->mark.file, "/sub/inc_mid.yaml") != NULL);
    CHECK_INT_EQ(stride ? stride->value->mark.line : 0, 5);
    const em_map_entry *kind = em_node_get_entry(em_node_get_path(n, "stages.data"), "kind");
    CHECK(kind && strstr(kind->value->mark.file, "/inc_base.yaml") != NULL);
    CHECK(kind && strstr(kind->value->mark.file, "sub/") == NULL);
    em_node_free(n);
}

static void check_errors(void) {
    check_error("cycle_a.yaml", "@/cycle_b.yaml:4:5: include cycle: @/cycle_a.yaml -> "
                                "@/cycle_b.yaml -> @/cycle_a.yaml");
    check_error("self_include.yaml",
                "@/self_include.yaml:2:10: include cycle: @/self_include.yaml -> "
                "@/self_include.yaml");
    check_error("inc_missing.yaml", "@/inc_missing.yaml:5:5: cannot read included file "
                                    "'@/nowhere.yaml': No such file or directory");
    check_error("inc_directory.yaml", "@/inc_directory.yaml:2:10: cannot read included file "
                                      "'@/sub': it is a directory, not a regular file");
    check_error("inc_bad_type.yaml",
                "@/inc_bad_type.yaml:2:10: include needs a file name, found a map");
    /* errors inside an included file name that file */
    check_error("inc_malformed.yaml", "@/malformed_indent.yaml:6:4: did not find expected key "
                                      "(while parsing a block mapping at "
                                      "@/malformed_indent.yaml:4:3)");
    check_error(
        "inc_top_list.yaml",
        "@/top_list.yaml:2:1: the top level of a recipe must be a map of keys, found a list");
}

int main(void) {
    const char *src = getenv("EVALMESH_SOURCE_DIR");
    if (!src) TEST_SKIP("EVALMESH_SOURCE_DIR is not set (run through ctest)");
    snprintf(files_dir, sizeof files_dir, "%s/tests/recipe/files", src);
    check_merge();
    check_errors();
    return test_finish();
}
