/* Test driver: loads an lm-eval task YAML (em_lm_eval_task_load) and prints its examples as one
 * JSON document ({"name", "version", "output", "metrics", "num_fewshot", "examples": [{"doc",
 * "context", "continuations", "choices", "gold"}]}; a generate_until task also "until",
 * "max_gen_toks" and "filter"), or the error's message on stderr with its exit status. Usage:
 * lm_eval_task_dump TASK.yaml [NUM_FEWSHOT (-1: the YAML's) [LIMIT [RESPONSES.json]]]; with
 * RESPONSES (a list per example of generated texts) each example also has "scored": [[filtered
 * answer, exact_match], ...] from em_generation_score and "sample" (the samples-file line of
 * its first response), and the task has "results": per round
 * of responses (every example's k-th) its results document. The lead can replace it with `evalmesh
 * eval` once the command exists. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "stages/kinds/support/lm_eval_task.h"
#include "stages/tasks/generation_scoring.h"
#include "stages/tasks/task_results.h"
#include "util/regular_file.h"

static const char *output_name(em_task_output output) {
    return output == EM_TASK_MULTIPLE_CHOICE ? "multiple_choice"
           : output == EM_TASK_LOGLIKELIHOOD ? "loglikelihood"
                                             : "generate_until";
}

/* "scored" of example i: each of its responses filtered and scored; outcomes[k * examples + i]
 * the outcome of its k-th response. */
static em_status score_responses(const em_task *task, size_t i, const cJSON *responses, cJSON *e,
                                 em_example_outcome *outcomes) {
    cJSON *scored = cJSON_AddArrayToObject(e, "scored");
    const cJSON *r;
    size_t k = 0;
    cJSON_ArrayForEach(r, responses) {
        char *answer;
        em_example_outcome outcome;
        em_status err =
            em_generation_score(task, &task->examples[i], r->valuestring, &answer, &outcome);
        if (err) return err;
        outcomes[k++ * task->example_count + i] = outcome;
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(answer));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(outcome.exact_match));
        cJSON_AddItemToArray(scored, pair);
        if (k == 1) { /* the samples-file line of the first response */
            char *line = em_task_generation_sample_json(task, &task->examples[i], r->valuestring,
                                                        answer, &outcome);
            cJSON_AddItemToObject(e, "sample", cJSON_Parse(line));
            free(line);
        }
        free(answer);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: %s TASK.yaml [NUM_FEWSHOT [LIMIT [RESPONSES.json]]]\n", argv[0]);
        return EM_EXIT_BAD_INPUT;
    }
    int shots = argc > 2 ? atoi(argv[2]) : -1;
    size_t limit = argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) : 0;
    em_task *task;
    em_status err = em_lm_eval_task_load(argv[1], shots, EM_LM_EVAL_FEWSHOT_SEED, limit, &task);
    cJSON *responses = NULL;
    char *responses_text = NULL;
    if (!err && argc > 4 &&
        !(err = em_read_regular_file(argv[4], EM_TEXT_MAX_BYTES, "the responses", &responses_text,
                                     NULL)))
        responses = cJSON_Parse(responses_text);
    free(responses_text);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "name", task->name);
    cJSON_AddStringToObject(out, "version", task->version);
    cJSON_AddStringToObject(out, "output", output_name(task->output));
    if (task->output == EM_TASK_GENERATE_UNTIL) {
        cJSON_AddItemToObject(out, "until",
                              cJSON_CreateStringArray((const char *const *)task->generation.until,
                                                      (int)task->generation.until_count));
        cJSON_AddNumberToObject(out, "max_gen_toks", task->generation.max_gen_toks);
        cJSON_AddStringToObject(out, "filter", task->generation.filter.name);
    }
    cJSON_AddNumberToObject(out, "metrics", task->metrics);
    cJSON_AddNumberToObject(out, "num_fewshot", task->num_fewshot);
    cJSON *examples = cJSON_AddArrayToObject(out, "examples");
    size_t rounds = responses ? (size_t)cJSON_GetArraySize(cJSON_GetArrayItem(responses, 0)) : 0;
    em_example_outcome *outcomes = em_xcalloc(rounds * task->example_count + 1, sizeof *outcomes);
    for (size_t i = 0; i < task->example_count; i++) {
        const em_task_example *ex = &task->examples[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "doc", (double)ex->doc_index);
        cJSON_AddStringToObject(e, "context", ex->context);
        cJSON_AddItemToObject(
            e, "continuations",
            cJSON_CreateStringArray((const char *const *)ex->continuations, (int)ex->choice_count));
        cJSON_AddItemToObject(
            e, "choices",
            cJSON_CreateStringArray((const char *const *)ex->choices, (int)ex->choice_count));
        cJSON_AddNumberToObject(e, "gold", ex->gold);
        cJSON_AddItemToObject(e, "doc_json", cJSON_Parse(ex->doc_json));
        cJSON_AddItemToArray(examples, e);
        if (responses && !err)
            err = score_responses(task, i, cJSON_GetArrayItem(responses, (int)i), e, outcomes);
    }
    /* per round of responses (the k-th of every example): the task's results document */
    cJSON *results = rounds ? cJSON_AddArrayToObject(out, "results") : NULL;
    for (size_t k = 0; !err && k < rounds; k++) {
        em_task_result result;
        em_task_result_of(task, outcomes + k * task->example_count, &result);
        char *json = em_task_results_json(&result, 1, NULL, 0);
        cJSON_AddItemToArray(results, cJSON_Parse(json));
        free(json);
    }
    free(outcomes);
    cJSON_Delete(responses);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        cJSON_Delete(out);
        em_task_free(task);
        return code;
    }
    char *text = cJSON_Print(out);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(out);
    em_task_free(task);
    return 0;
}
