/* The task sources, one row each (task_sources.h). */
#include "stages/kinds/support/task_sources.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/suffix.h"
#include "stages/kinds/support/lm_eval_task.h"
#include "stages/tasks/bigbench_catalog.h"
#include "stages/tasks/bigbench_task.h"

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

static bool is_bigbench_path(const char *spec) {
    struct stat st;
    return em_ends_with(spec, ".json") || (stat(spec, &st) == 0 && S_ISDIR(st.st_mode));
}

/* Loads the BIG-bench task (or the subtasks of the task) at path, appended to *tasks; group names
 * the group each is reported under: the one given, else the task's own name when it has
 * subtasks. */
static em_status load_bigbench(const char *path, const char *group,
                               const em_task_load_options *options, em_task ***tasks,
                               size_t *count) {
    em_bigbench_options bigbench = {.num_fewshot =
                                        options->num_fewshot < 0 ? 0 : options->num_fewshot,
                                    .limit = options->limit,
                                    .generative = options->generative};
    em_task **loaded = NULL;
    size_t n = 0;
    em_status err = em_bigbench_load(path, &bigbench, &loaded, &n);
    if (err) return err;
    for (size_t i = 0; i < n; i++) {
        if (group)
            loaded[i]->group = em_xstrdup(group);
        else if (n > 1) /* "task:subtask": the subtasks are reported under their task */
            loaded[i]->group =
                em_xasprintf("%.*s", (int)strcspn(loaded[i]->name, ":"), loaded[i]->name);
        append(tasks, count, loaded[i]);
    }
    free(loaded);
    return NULL;
}

static em_status load_bigbench_path(const char *spec, const em_task_load_options *options,
                                    em_task ***tasks, size_t *count) {
    return load_bigbench(spec, NULL, options, tasks, count);
}

static bool is_bigbench_name(const char *spec) {
    return *spec && !strchr(spec, '/');
}

/* A BIG-bench group (every member, in the group's order) or one task, by name, from the fetched
 * sdist's tasks folder. */
static em_status load_bigbench_name(const char *spec, const em_task_load_options *options,
                                    em_task ***tasks, size_t *count) {
    char *dir = em_bigbench_tasks_dir();
    const char *const *members = em_bigbench_group(spec);
    const char *const single[] = {spec, NULL};
    em_status err = NULL;
    for (const char *const *name = members ? members : single; *name && !err; name++) {
        char *path = NULL;
        err = em_bigbench_find(dir, *name, &path);
        if (!err) err = load_bigbench(path, members ? spec : NULL, options, tasks, count);
        free(path);
    }
    free(dir);
    return err;
}

bool em_task_spec_is_path(const char *spec) {
    return strchr(spec, '/') || is_task_yaml(spec) || em_ends_with(spec, ".json");
}

const em_task_source em_task_sources[] = {
    {"lm-evaluation-harness task YAML over local JSON Lines", is_task_yaml, load_task_yaml},
    {"BIG-bench task file (*.json) or its folder (subtasks in folders)", is_bigbench_path,
     load_bigbench_path},
    {"BIG-bench task or group by name (the bigbench 1.0.0 sdist, tools/fetch-bigbench)",
     is_bigbench_name, load_bigbench_name},
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
