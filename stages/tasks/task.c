/* Freeing tasks (task.h). */
#include "stages/tasks/task.h"

#include <stdlib.h>
#include <string.h>

void em_task_example_clear(em_task_example *example) {
    for (size_t c = 0; c < example->choice_count; c++) {
        free(example->continuations ? example->continuations[c] : NULL);
        free(example->choices ? example->choices[c] : NULL);
    }
    free(example->context);
    free(example->continuations);
    free(example->choices);
    free(example->target_scores);
    free(example->doc_json);
    memset(example, 0, sizeof *example);
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
