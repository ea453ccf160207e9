/* Unit tests of the run directory (runner/run_dir.c) on one process: default names with their
 * -2, -3 suffixes, --run-dir that must be absent or empty unless forced, the resolved recipe and
 * the per-rank log files. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runner/recipe/recipe.h"
#include "runner/run_dir.h"

/* The run directory's time stamp of `seconds` after now. */
static void stamp(time_t now, int seconds, char *buf, size_t size) {
    time_t t = now + seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, size, "%Y%m%d-%H%M%S", &tm);
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void test_default_names(void) {
    /* The name has the time in seconds: when runs/t-<now> and -2 exist, the next is -3. So that
     * no second ticking over can change the answer, both exist for every second of the next ten
     * minutes (longer than the test may run), and the name must be -3 of a second between the
     * clock read before and the one after. */
    time_t before = time(NULL);
    mkdir("runs", 0777);
    for (int s = 0; s <= 600; s++) {
        char st[32], path[128];
        stamp(before, s, st, sizeof st);
        snprintf(path, sizeof path, "runs/t-%s", st);
        mkdir(path, 0777);
        snprintf(path, sizeof path, "runs/t-%s-2", st);
        mkdir(path, 0777);
    }
    char *path = NULL;
    em_status err = em_run_dir_create(NULL, "t", NULL, false, &path);
    time_t after = time(NULL);
    CHECK(err == NULL);
    bool found = false;
    for (time_t t = before; t <= after && !found; t++) {
        char st[32], expected[128];
        stamp(t, 0, st, sizeof st);
        snprintf(expected, sizeof expected, "runs/t-%s-3", st);
        found = path && strcmp(path, expected) == 0;
    }
    CHECK(found);
    CHECK(path && is_dir(path));
    free(path);
}

static void test_requested(void) {
    char *path = NULL;
    CHECK(em_run_dir_create(NULL, "t", "deep/er/dir", false, &path) == NULL);
    CHECK_STR_EQ(path, "deep/er/dir");
    CHECK(is_dir("deep/er/dir"));
    free(path);

    /* Empty: fine. Not empty: only with force. */
    CHECK(em_run_dir_create(NULL, "t", "deep/er/dir", false, &path) == NULL);
    free(path);
    FILE *f = fopen("deep/er/dir/old.txt", "w");
    fclose(f);
    em_status err = em_run_dir_create(NULL, "t", "deep/er/dir", false, &path);
    CHECK(err != NULL && path == NULL);
    if (err) {
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        CHECK_STR_EQ(err->message, "run directory 'deep/er/dir' exists and is not empty (--force "
                                   "writes into it anyway)");
        em_error_free(err);
    }
    CHECK(em_run_dir_create(NULL, "t", "deep/er/dir", true, &path) == NULL);
    CHECK_STR_EQ(path, "deep/er/dir");
    free(path);

    /* A file is not a directory, forced or not. */
    err = em_run_dir_create(NULL, "t", "deep/er/dir/old.txt", true, &path);
    CHECK(err != NULL);
    if (err) {
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        CHECK_STR_EQ(err->message,
                     "run directory 'deep/er/dir/old.txt' exists and is not a directory");
        em_error_free(err);
    }
}

static void test_files(void) {
    const char *text = "name: t\nstages:\n  a: {kind: src, value: 3}\n";
    em_node *recipe;
    CHECK(em_yaml_parse(text, strlen(text), "t.yaml", &recipe) == NULL);
    mkdir("files", 0777);
    CHECK(em_run_dir_write_recipe("files", recipe) == NULL);
    em_node *back = NULL;
    CHECK(em_yaml_load_file("files/recipe.resolved.yaml", &back) == NULL);
    CHECK_INT_EQ(em_node_get_int(em_node_get_path(back, "stages.a"), "value", 0), 3);
    CHECK_STR_EQ(em_node_get_string(back, "name", NULL), "t");
    em_node_free(back);

    FILE *log0 = NULL, *log3 = NULL;
    CHECK(em_run_dir_open_log("files", 0, &log0) == NULL);
    CHECK(em_run_dir_open_log("files", 3, &log3) == NULL);
    if (log0) fclose(log0);
    if (log3) fclose(log3);
    CHECK(is_file("files/evalmesh.log"));
    CHECK(is_file("files/evalmesh.rank3.log"));

    em_status err = em_run_dir_write_recipe("no/such/dir", recipe);
    em_node_free(recipe);
    CHECK(err != NULL);
    if (err) {
        CHECK_INT_EQ(err->exit_code, EM_EXIT_RUNTIME);
        CHECK_STR_EQ(err->message,
                     "cannot write 'no/such/dir/recipe.resolved.yaml': No such file or directory");
        em_error_free(err);
    }
}

int main(void) {
    char dir[] = "/tmp/evalmesh-test-run-dir-XXXXXX";
    if (!mkdtemp(dir) || chdir(dir) != 0) {
        perror("temporary directory");
        return 1;
    }
    test_default_names();
    test_requested();
    test_files();
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", dir);
    if (chdir("/") != 0 || system(cleanup) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
