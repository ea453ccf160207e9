/* BIG-bench task sources that are refused or partly loaded, on the committed files under
 * tests/tasks/bigbench: a malformed task.json (file:line:col), a missing and a wrongly typed
 * field (named, with the example's index), a generative-only task, too few examples for the
 * shots (also when examples equal as Python compares them are left out), a missing file: each
 * exit 2 with its message. A task whose subtasks are one
 * multiple-choice and one generative loads the first only. The catalog: a task found by name,
 * an unknown name answered with the closest, a missing tasks folder, the bigbench_lite group. */
#include <stdlib.h>
#include <string.h>

#include "stages/tasks/bigbench_catalog.h"
#include "stages/tasks/bigbench_task.h"
#include "test.h"

static const char *dir;

/* Loading rel (generative tasks loaded or not) fails with exit 2 and a message containing each
 * of want (NULL-terminated). */
static void check_refused_as(const char *rel, int shots, bool generative, const char *const *want) {
    char *path = em_xasprintf("%s/%s", dir, rel);
    em_bigbench_options options = {.num_fewshot = shots, .generative = generative};
    em_task **tasks = NULL;
    size_t count = 7;
    em_status err = em_bigbench_load(path, &options, &tasks, &count);
    CHECK(err != NULL);
    if (err) {
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        for (; *want; want++) CHECK_CONTAINS(err->message, *want);
        printf("%s: %s\n", rel, err->message);
    }
    CHECK(tasks == NULL);
    CHECK_INT_EQ(count, 0);
    em_error_free(err);
    free(path);
}

static void check_refused(const char *rel, int shots, const char *const *want) {
    check_refused_as(rel, shots, false, want);
}

static void check_catalog(void) {
    char *path = NULL;
    em_status err = em_bigbench_find(dir, "tiny", &path);
    CHECK(err == NULL);
    char *want = em_xasprintf("%s/tiny", dir);
    CHECK_STR_EQ(path, want);
    free(want);
    free(path);
    err = em_bigbench_find(dir, "tinny", &path);
    CHECK(err != NULL && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err) CHECK_STR_EQ(err->message, "unknown BIG-bench task 'tinny' (the closest: 'tiny')");
    CHECK(path == NULL);
    em_error_free(err);
    err = em_bigbench_find("/nonexistent/benchmark_tasks", "tiny", &path);
    CHECK(err != NULL && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err) CHECK_CONTAINS(err->message, "run tools/fetch-bigbench");
    em_error_free(err);

    const char *const *lite = em_bigbench_group("bigbench_lite");
    size_t members = 0;
    while (lite && lite[members]) members++;
    CHECK_INT_EQ(members, 18);
    CHECK_STR_EQ(lite[0], "bbq_lite_json");
    CHECK_STR_EQ(lite[17], "winowhy");
    CHECK(em_bigbench_group("bigbench_heavy") == NULL);

    setenv("EVALMESH_CACHE", "/cache", 1);
    char *tasks_dir = em_bigbench_tasks_dir();
    CHECK_STR_EQ(tasks_dir, "/cache/bigbench-1.0.0/benchmark_tasks");
    free(tasks_dir);
}

int main(void) {
    const char *source = getenv("EVALMESH_SOURCE_DIR");
    char *tasks_dir = em_xasprintf("%s/tests/tasks/bigbench", source ? source : ".");
    dir = tasks_dir;

    /* a comma before '}': cJSON's error pointer is just past the brace (column 60) */
    check_refused("malformed.json", 0, (const char *[]){"malformed.json:5:61: invalid JSON", NULL});
    check_refused("missing_target_scores", 0,
                  (const char *[]){"missing_target_scores/task.json: task 'missing_target_scores'"
                                   ": examples[2]: 'target_scores' must be an object",
                                   NULL});
    check_refused(
        "wrong_type/task.json", 0,
        (const char *[]){"task 'wrong_type': 'example_input_prefix' must be a string", NULL});
    check_refused("generative", 0,
                  (const char *[]){"task 'generative' is generative (metrics: exact_str_match): it "
                                   "loads with the task stage's bigbench_generative (evalmesh "
                                   "eval --bigbench-generative)",
                                   NULL});
    check_refused(
        "tiny", 4,
        (const char *[]){"task 'tiny': insufficient distinct examples (4) for 4 shots", NULL});
    check_refused("absent", 0, (const char *[]){"absent", NULL});
    /* generative tasks loaded: what BIG-bench's scoring cannot take */
    check_refused_as("gen_two_groups", 0, true,
                     (const char *[]){"task 'gen_two_groups': output_regex: the pattern "
                                      "'(\\d+)(x)?' has 2 groups; BIG-bench takes at most one "
                                      "(use (?:...) for the others)",
                                      NULL});
    check_refused_as("gen_lazy", 0, true,
                     (const char *[]){"task 'gen_lazy': output_regex: the pattern '\\d+?' at "
                                      "character 4: lazy (*? +? ?? {m,n}?) and possessive "
                                      "quantifiers are not supported",
                                      NULL});
    check_refused_as("gen_bleu", 0, true,
                     (const char *[]){"task 'gen_bleu' is scored by bleu, rouge; evalmesh "
                                      "computes BIG-bench's exact_str_match of generative tasks "
                                      "only",
                                      NULL});
    check_refused_as("gen_no_target", 0, true,
                     (const char *[]){"task 'gen_no_target': examples[1]: 'target' is missing "
                                      "(the task has generative metrics)",
                                      NULL});

    /* one multiple-choice and one generative subtask: the first is loaded, named task:subtask */
    char *mixed = em_xasprintf("%s/mixed", dir);
    em_bigbench_options options = {0};
    em_task **tasks;
    size_t count;
    em_status err = em_bigbench_load(mixed, &options, &tasks, &count);
    CHECK(err == NULL);
    if (!err) {
        CHECK_INT_EQ(count, 1);
        CHECK_STR_EQ(tasks[0]->name, "mixed:arithmetic");
        CHECK_INT_EQ(tasks[0]->example_count, 4);
        em_task_free(tasks[0]);
        free(tasks);
    }
    em_error_free(err);
    free(mixed);

    /* examples 0 and 1 are == in Python, so neither is a shot for the other: 3 cannot be had */
    check_refused("equal_examples", 3,
                  (const char *[]){"task 'equal_examples': examples[1] has fewer than 3 other "
                                   "examples to draw its shots from",
                                   NULL});

    check_catalog();
    free(tasks_dir);
    return test_finish();
}
