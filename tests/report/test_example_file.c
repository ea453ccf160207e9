/* Unit tests of per-example values (stages/metrics/example_values.c) and example files
 * (stages/report/example_file.c): a group's set is its members' examples one after another, the
 * first differing example is named, a file reads back to the same values and the same bytes, and
 * a file that does not match its recorded sha256 or is damaged is refused (exit 2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/sha256.h"
#include "stages/report/example_file.h"
#include "test.h"

/* A task set of n examples: doc i, sha256 of "key:i", acc 1 on even i, grade i / n. */
static void add_task(em_example_values *v, const char *key, size_t n) {
    em_example_set *set = em_example_values_add_set(v, key, n);
    double *acc = em_example_set_add_column(set, "acc", true)->values;
    double *grade = em_example_set_add_column(set, "multiple_choice_grade", false)->values;
    for (size_t i = 0; i < n; i++) {
        char text[64];
        snprintf(text, sizeof text, "%s:%zu", key, i);
        set->doc[i] = (int64_t)i;
        em_sha256_hex(text, strlen(text), set->sha256[i]);
        acc[i] = i % 2 == 0;
        grade[i] = (double)i / (double)n;
    }
}

int main(void) {
    em_example_values *v = em_example_values_new("tasks");
    add_task(v, "tasks/a", 3);
    add_task(v, "tasks/b", 2);
    size_t members[] = {0, 1};
    const char *metrics[] = {"multiple_choice_grade", "acc"};
    const em_example_set *g =
        em_example_values_add_concatenation(v, "tasks/group", members, 2, metrics, 2);
    CHECK_INT_EQ(g->count, 5);
    CHECK_INT_EQ(g->doc[3], 0);
    CHECK_STR_EQ(g->sha256[4], v->sets[1].sha256[1]);
    CHECK(!em_example_set_column(g, "multiple_choice_grade")->binary);
    CHECK(em_example_set_column(g, "acc")->binary);
    CHECK(em_example_set_column(g, "multiple_choice_grade")->values[4] == 0.5);
    CHECK(em_example_set_column(g, "acc")->values[3] == 1);
    CHECK(em_example_values_find(v, "tasks/b.acc", 7) == &v->sets[1]);
    CHECK(em_example_values_find(v, "tasks/c.acc", 7) == NULL);

    /* differences: none, a changed example, a missing one */
    CHECK(em_example_set_difference(&v->sets[0], &v->sets[0]) == NULL);
    char *d = em_example_set_difference(&v->sets[0], &v->sets[1]);
    char want[256];
    snprintf(want, sizeof want,
             "example 0 differs (doc 0 with requests sha256 %.12s in the baseline, doc 0 with "
             "%.12s in this run)",
             v->sets[0].sha256[0], v->sets[1].sha256[0]);
    CHECK_STR_EQ(d, want);
    free(d);
    em_example_values *fewer = em_example_values_new("tasks");
    add_task(fewer, "tasks/a", 2);
    d = em_example_set_difference(&v->sets[0], &fewer->sets[0]);
    CHECK_STR_EQ(d, "example 2 (doc 2) is only in the baseline: the baseline has 3 examples, this "
                    "run 2");
    free(d);
    em_example_values_free(fewer);

    /* a file reads back to the same values and the same bytes */
    char dir[] = "/tmp/em_example_file_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/examples_tasks.json", dir);
    CHECK(em_example_file_write(path, v) == NULL);
    char *text = em_example_file_text(v);
    char hex[65];
    em_sha256_hex(text, strlen(text), hex);
    em_example_values *back = NULL;
    CHECK(em_example_file_read(path, hex, &back) == NULL);
    CHECK(back && back->count == 3 && strcmp(back->stage, "tasks") == 0);
    if (back) {
        char *again = em_example_file_text(back);
        CHECK_STR_EQ(again, text);
        free(again);
        CHECK(!em_example_set_column(&back->sets[2], "multiple_choice_grade")->binary);
        CHECK(em_example_set_column(&back->sets[2], "acc")->binary);
    }
    em_example_values_free(back);

    /* the wrong sha256; a damaged file */
    char zeros[65];
    memset(zeros, '0', 64);
    zeros[64] = 0;
    em_status err = em_example_file_read(path, zeros, &back);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err) CHECK_CONTAINS(err->message, "not 0000000000000000000000000000000000000000");
    em_error_free(err);
    FILE *f = fopen(path, "w");
    fputs("{\"format\": \"evalmesh.task_examples/1\", \"stage\": \"tasks\", \"tasks\": [{\"key\": "
          "\"tasks/a\", \"doc\": [0], \"sha256\": [\"x\"], \"binary\": [], \"values\": {}}]}\n",
          f);
    fclose(f);
    err = em_example_file_read(path, NULL, &back);
    CHECK(err && back == NULL);
    if (err) CHECK_CONTAINS(err->message, "an example without a document index or sha256");
    em_error_free(err);
    unlink(path);
    rmdir(dir);
    free(text);
    em_example_values_free(v);
    return test_finish();
}
