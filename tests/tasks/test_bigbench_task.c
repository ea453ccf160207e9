/* BIG-bench task.json loading against BIG-bench's own formatting (bigbench_expected.json, from
 * bigbench_reference.py's copy of json_task.py): for every case (task, shots, limit) the same
 * tasks and subtask names, the same examples in document order, each context byte for byte (its
 * sha256, the first one in full), the continuations, target scores and gold; generative tasks
 * (loaded with options.generative) their prompts and targets the same way.
 *   tasks_bigbench_task local   the committed task under tests/tasks/bigbench (always runs)
 *   tasks_bigbench_task sdist   real tasks of the bigbench 1.0.0 sdist (tools/fetch-bigbench;
 *                               skipped when it cannot be fetched), and every bigbench_lite
 *                               member found by name and loaded (3 examples a subtask) */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "expected_json.h"
#include "stages/tasks/bigbench_catalog.h"
#include "stages/tasks/bigbench_task.h"
#include "stages/tasks/generation_scoring.h"
#include "test.h"
#include "util/sha256.h"

static const cJSON *item(const cJSON *obj, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static void check_example(const char *task, const em_task_example *got, const cJSON *want) {
    size_t doc = (size_t)item(want, "doc")->valuedouble;
    CHECK_INT_EQ(got->doc_index, doc);
    char hex[65];
    em_sha256_hex(got->context, strlen(got->context), hex);
    if (strcmp(hex, item(want, "context_sha256")->valuestring) != 0)
        fprintf(stderr, "%s: examples[%zu]: context differs:\n%s\n", task, doc, got->context);
    CHECK_STR_EQ(hex, item(want, "context_sha256")->valuestring);
    if (item(want, "context")) CHECK_STR_EQ(got->context, item(want, "context")->valuestring);
    const cJSON *continuations = item(want, "continuations"), *scores = item(want, "target_scores");
    CHECK_INT_EQ(got->choice_count, cJSON_GetArraySize(continuations));
    if (!scores) { /* generative: the targets, any of which a response may equal */
        for (size_t c = 0; c < got->choice_count; c++) {
            CHECK_STR_EQ(got->choices[c], cJSON_GetArrayItem(continuations, (int)c)->valuestring);
            CHECK_STR_EQ(got->continuations[c], got->choices[c]);
        }
        CHECK(got->target_scores == NULL);
        CHECK(got->doc_json != NULL);
        return;
    }
    for (size_t c = 0; c < got->choice_count && c < (size_t)cJSON_GetArraySize(continuations);
         c++) {
        CHECK_STR_EQ(got->continuations[c], cJSON_GetArrayItem(continuations, (int)c)->valuestring);
        CHECK_STR_EQ(got->choices[c], cJSON_GetArrayItem(continuations, (int)c)->valuestring);
        CHECK(got->target_scores[c] == cJSON_GetArrayItem(scores, (int)c)->valuedouble);
    }
    CHECK_INT_EQ(got->gold, item(want, "gold")->valueint);
    CHECK(got->doc_json != NULL);
}

static void check_case(const char *tasks_dir, const cJSON *c, bool generative) {
    const char *name = item(c, "task")->valuestring;
    em_bigbench_options options = {.num_fewshot = item(c, "shots")->valueint,
                                   .limit = (size_t)item(c, "limit")->valuedouble,
                                   .generative = generative};
    char *path = em_xasprintf("%s/%s", tasks_dir, name);
    em_task **tasks;
    size_t count;
    em_status err = em_bigbench_load(path, &options, &tasks, &count);
    if (err) fprintf(stderr, "%s\n", err->message);
    CHECK(err == NULL);
    const cJSON *want = item(c, "tasks");
    CHECK_INT_EQ(count, cJSON_GetArraySize(want));
    printf("%s, %d shots, limit %zu: %zu tasks\n", name, options.num_fewshot, options.limit, count);
    for (size_t t = 0; !err && t < count && t < (size_t)cJSON_GetArraySize(want); t++) {
        const cJSON *w = cJSON_GetArrayItem(want, (int)t);
        const em_task *task = tasks[t];
        CHECK_STR_EQ(task->name, item(w, "name")->valuestring);
        CHECK_STR_EQ(task->version, "1.0.0");
        CHECK(task->format == EM_TASK_FORMAT_BIGBENCH);
        CHECK(task->output == (generative ? EM_TASK_GENERATE_UNTIL : EM_TASK_MULTIPLE_CHOICE));
        CHECK(task->metrics ==
              (generative ? EM_TASK_METRIC_EXACT_STR_MATCH : EM_TASK_METRIC_MULTIPLE_CHOICE_GRADE));
        if (generative) { /* BIG-bench's Hugging Face model: 256 tokens, 256 characters kept */
            CHECK_INT_EQ(task->generation.max_gen_toks, 256);
            CHECK_INT_EQ(task->generation.max_length, 256);
            CHECK_INT_EQ(task->generation.until_count, 0);
            CHECK(task->generation.output_regex != NULL);
        }
        if (generative && strcmp(name, "gen_tiny") == 0)
            CHECK_STR_EQ(task->generation.stop_string, "\n");
        CHECK_INT_EQ(task->num_fewshot, options.num_fewshot);
        CHECK(task->absolute_normalization == cJSON_IsTrue(item(w, "absolute_normalization")));
        const cJSON *examples = item(w, "examples");
        CHECK_INT_EQ(task->example_count, cJSON_GetArraySize(examples));
        for (size_t e = 0; e < task->example_count && e < (size_t)cJSON_GetArraySize(examples); e++)
            check_example(task->name, &task->examples[e], cJSON_GetArrayItem(examples, (int)e));
    }
    for (size_t t = 0; !err && t < count; t++) em_task_free(tasks[t]);
    if (!err) free(tasks);
    em_error_free(err);
    free(path);
}

/* The folder tools/fetch-bigbench prints; skips the test when it exits 77 (offline). */
static char *fetch_bigbench(void) {
    const char *source = getenv("EVALMESH_SOURCE_DIR");
    char *command = em_xasprintf("%s/tools/fetch-bigbench", source ? source : ".");
    FILE *p = popen(command, "r");
    char line[4096] = "";
    if (!p || !fgets(line, sizeof line, p)) line[0] = '\0';
    int status = p ? pclose(p) : -1;
    free(command);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        TEST_SKIP("tools/fetch-bigbench could not fetch the bigbench 1.0.0 sdist (offline?)");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !line[0]) {
        fprintf(stderr, "tools/fetch-bigbench failed (status %d)\n", status);
        exit(1);
    }
    line[strcspn(line, "\n")] = '\0';
    return em_xstrdup(line);
}

/* Every member of bigbench_lite is found and loads: 13 tasks and 34 subtasks (bbq_lite_json alone
 * has 18). */
static void check_lite(const char *tasks_dir) {
    size_t loaded = 0;
    for (const char *const *name = em_bigbench_group("bigbench_lite"); *name; name++) {
        char *path;
        em_status err = em_bigbench_find(tasks_dir, *name, &path);
        em_task **tasks = NULL;
        size_t count = 0;
        em_bigbench_options options = {.num_fewshot = 1, .limit = 3};
        if (!err) err = em_bigbench_load(path, &options, &tasks, &count);
        if (err) fprintf(stderr, "%s: %s\n", *name, err->message);
        CHECK(err == NULL);
        for (size_t t = 0; t < count; t++) {
            CHECK_INT_EQ(tasks[t]->example_count, 3);
            em_task_free(tasks[t]);
        }
        loaded += count;
        free(tasks);
        em_error_free(err);
        if (!err) free(path);
    }
    CHECK_INT_EQ(loaded, 47);
}

/* gen_tiny's texts scored through em_generation_score: its stop_string "\n" and output_regex
 * [-+]?\d+ applied (json_task.py's postprocess_output), then matched against the targets. */
static void check_generation_scoring(const char *tasks_dir) {
    char *path = em_xasprintf("%s/gen_tiny", tasks_dir);
    em_bigbench_options options = {.generative = true};
    em_task **tasks;
    size_t count;
    em_status err = em_bigbench_load(path, &options, &tasks, &count);
    CHECK(err == NULL && count == 1);
    if (err) return;
    const em_task_example *four = &tasks[0]->examples[1]; /* "2 + 2": "4" or "four" */
    CHECK_STR_EQ(four->choices[1], "four");
    em_generation_request request;
    em_generation_request_of(tasks[0], four, &request);
    CHECK_INT_EQ(request.until_count, 0);
    CHECK_INT_EQ(request.max_gen_toks, 256);
    CHECK(request.context == four->context);
    static const struct {
        const char *generated, *answer;
        double score;
    } cases[] = {
        {" 4\nQ: 3 + 4\nA: 7", "4", 1}, /* cut after the stop string, then the number */
        {"\n4", "4", 1},                /* a stop string at the start does not cut */
        {" four", "", 0},               /* no number: "" */
        {"+4 and 5", "+4", 0},          /* the regex keeps the sign; "+4" is no target */
        {"44", "44", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *answer = NULL;
        em_example_outcome outcome;
        CHECK(em_generation_score(tasks[0], four, cases[i].generated, &answer, &outcome) == NULL);
        CHECK_STR_EQ(answer, cases[i].answer);
        CHECK(outcome.exact_match == cases[i].score);
        free(answer);
    }
    em_task_free(tasks[0]);
    free(tasks);
    free(path);
}

int main(int argc, char **argv) {
    bool sdist = argc > 1 && strcmp(argv[1], "sdist") == 0;
    cJSON *expected = expected_json("bigbench_expected.json");
    const char *source = getenv("EVALMESH_SOURCE_DIR");
    char *tasks_dir =
        sdist ? fetch_bigbench() : em_xasprintf("%s/tests/tasks/bigbench", source ? source : ".");
    const cJSON *c;
    int cases = 0;
    cJSON_ArrayForEach(c, item(expected, sdist ? "formatting" : "local_formatting")) {
        check_case(tasks_dir, c, false);
        cases++;
    }
    CHECK_INT_EQ(cases, sdist ? 12 : 6);
    cases = 0;
    cJSON_ArrayForEach(
        c, item(expected, sdist ? "generative_formatting" : "local_generative_formatting")) {
        check_case(tasks_dir, c, true);
        cases++;
    }
    CHECK_INT_EQ(cases, sdist ? 5 : 3);
    if (!sdist) check_generation_scoring(tasks_dir);
    if (sdist) check_lite(tasks_dir);
    free(tasks_dir);
    cJSON_Delete(expected);
    return test_finish();
}
