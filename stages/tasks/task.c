/* Freeing an em_task, its examples and its generation settings. */
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

void em_task_generation_clear(em_task_generation *g) {
    for (size_t i = 0; i < g->until_count; i++) free(g->until[i]);
    free(g->until);
    em_filter_pipeline_clear(&g->filter);
    em_exact_match_options_clear(&g->exact_match);
    free(g->stop_string);
    em_python_regex_free(g->output_regex);
    *g = (em_task_generation){0};
}

void em_task_free(em_task *task) {
    if (!task) return;
    for (size_t i = 0; i < task->example_count; i++) em_task_example_clear(&task->examples[i]);
    free(task->examples);
    free(task->name);
    free(task->version);
    free(task->group);
    em_task_generation_clear(&task->generation);
    free(task);
}
