/* Test driver: loads an lm-eval task YAML (em_lm_eval_task_load) and prints its examples as one
 * JSON document ({"name", "version", "output", "metrics", "num_fewshot", "examples": [{"doc",
 * "context", "continuations", "choices", "gold"}]}), or the error's message on stderr with its
 * exit status. Usage: lm_eval_task_dump TASK.yaml [NUM_FEWSHOT (-1: the YAML's) [LIMIT]]. The
 * lead can replace it with `evalmesh eval` once the command exists. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "stages/kinds/support/lm_eval_task.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s TASK.yaml [NUM_FEWSHOT [LIMIT]]\n", argv[0]);
        return EM_EXIT_BAD_INPUT;
    }
    int shots = argc > 2 ? atoi(argv[2]) : -1;
    size_t limit = argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) : 0;
    em_task *task;
    em_status err = em_lm_eval_task_load(argv[1], shots, EM_LM_EVAL_FEWSHOT_SEED, limit, &task);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "name", task->name);
    cJSON_AddStringToObject(out, "version", task->version);
    cJSON_AddStringToObject(out, "output",
                            task->output == EM_TASK_MULTIPLE_CHOICE ? "multiple_choice"
                                                                    : "loglikelihood");
    cJSON_AddNumberToObject(out, "metrics", task->metrics);
    cJSON_AddNumberToObject(out, "num_fewshot", task->num_fewshot);
    cJSON *examples = cJSON_AddArrayToObject(out, "examples");
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
    }
    char *text = cJSON_Print(out);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(out);
    em_task_free(task);
    return 0;
}
