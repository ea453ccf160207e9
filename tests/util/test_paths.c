/* The recipe path rule (util/paths.h): relative to the directory of the file that wrote the
 * path, absolute as it is, command-line and in-memory paths relative to the working directory;
 * the result is tidied. */
#include <stdlib.h>

#include "test.h"
#include "util/error.h"
#include "util/paths.h"

static void check_beside(const char *written_in, const char *path, const char *expected) {
    char *got = em_path_beside(written_in, path);
    CHECK_STR_EQ(got, expected);
    free(got);
}

static void check_tidy(const char *path, const char *expected) {
    char *copy = em_xstrdup(path);
    em_path_tidy(copy);
    CHECK_STR_EQ(copy, expected);
    free(copy);
}

int main(void) {
    /* relative to the writing file's directory */
    check_beside("recipes/demo.yaml", "data/demo.txt", "recipes/data/demo.txt");
    check_beside("/srv/evals/nightly.yaml", "models/m.gguf", "/srv/evals/models/m.gguf");
    check_beside("recipes/parts/model.yaml", "../../models/m.gguf", "models/m.gguf");
    check_beside("a/b/c.yaml", "./x/../y.txt", "a/b/y.txt");
    /* a recipe in the working directory: the path as written */
    check_beside("demo.yaml", "data/demo.txt", "data/demo.txt");
    check_beside("demo.yaml", "../shared/m.gguf", "../shared/m.gguf");
    /* absolute paths stay (tidied) */
    check_beside("recipes/demo.yaml", "/data/m.gguf", "/data/m.gguf");
    check_beside("recipes/demo.yaml", "/data/./x/../m.gguf", "/data/m.gguf");
    /* the command line and recipes built in memory: relative to the working directory */
    check_beside("<command line>", "m.gguf", "m.gguf");
    check_beside("<evalmesh perplexity>", "../m.gguf", "../m.gguf");
    check_beside(NULL, "dir/m.gguf", "dir/m.gguf");

    check_tidy("a/./b//c/", "a/b/c");
    check_tidy("a/../..", "..");
    check_tidy("../a/../b", "../b");
    check_tidy("/../a", "/a");
    check_tidy("./", ".");
    check_tidy("/", "/");
    return test_finish();
}
