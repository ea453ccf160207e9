/* The task sources, one row each (task_sources.h). */
#include "stages/kinds/support/task_sources.h"

#include <stdlib.h>
#include <string.h>

#include "util/suffix.h"
#include "stages/kinds/support/lm_eval_task.h"

/* Appends task to *tasks. */
static void append(em_task ***tasks, size_t *count, em_task *task) {
    *tasks = em_xrealloc(*tasks, (*count + 1) * sizeof **tasks);
    (*tasks)[(*count)++] = task;
}

static bool is_task_yaml(const char *spec) {
    return em_ends_with(spec, ".yaml") || em_ends_with(spec, ".yml");
}

static em_status load_task_yaml(const char *spec, const em_task_load_options *options,
                                em_task ***tasks, size_t *count) {
    em_task *task = NULL;
    em_status err = em_lm_eval_task_load(spec, options->num_fewshot, options->fewshot_seed,
                                         options->limit, &task);
    if (!err) append(tasks, count, task);
    return err;
}

const em_task_source em_task_sources[] = {
    {"lm-evaluation-harness task YAML over local JSON Lines", is_task_yaml, load_task_yaml},
};
const size_t em_task_source_count = sizeof em_task_sources / sizeof *em_task_sources;

em_status em_tasks_load(const char *const *specs, size_t count, const em_task_load_options *options,
                        em_task ***tasks, size_t *task_count) {
    *tasks = NULL;
    *task_count = 0;
    em_status err = NULL;
    for (size_t i = 0; i < count && !err; i++) {
        const em_task_source *source = NULL;
        for (size_t r = 0; r < em_task_source_count && !source; r++)
            if (em_task_sources[r].claims(specs[i])) source = &em_task_sources[r];
        if (!source)
            err = em_error_new(EM_EXIT_BAD_INPUT, "task '%s': no task source reads it", specs[i]);
        else
            err = source->load(specs[i], options, tasks, task_count);
        if (err) err = em_error_prefix(err, "tasks[%zu]", i);
    }
    if (err) {
        em_tasks_free(*tasks, *task_count);
        *tasks = NULL;
        *task_count = 0;
    }
    return err;
}

void em_tasks_free(em_task **tasks, size_t count) {
    for (size_t i = 0; i < count; i++) em_task_free(tasks[i]);
    free(tasks);
}
