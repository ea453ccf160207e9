/* Freeing an em_task and its examples. */
#include "stages/tasks/task.h"

#include <stdlib.h>

void em_task_example_clear(em_task_example *example) {
    for (size_t i = 0; i < example->choice_count; i++) {
        if (example->continuations) free(example->continuations[i]);
        if (example->choices) free(example->choices[i]);
    }
    free(example->context);
    free(example->continuations);
    free(example->choices);
    free(example->target_scores);
    free(example->doc_json);
    *example = (em_task_example){0};
}

void em_task_free(em_task *task) {
    if (!task) return;
    for (size_t i = 0; i < task->example_count; i++) em_task_example_clear(&task->examples[i]);
    free(task->examples);
    free(task->name);
    free(task->version);
    free(task->group);
    free(task);
}
