/* Where a task named in a recipe's `tasks:` comes from: one row per source (an lm-eval-style task
 * YAML over JSON Lines; a BIG-bench task.json file or folder; a BIG-bench task or group by name
 * from the fetched BIG-bench sdist). The first row whose `claims` says yes loads it; a name no
 * row claims is refused (exit 2) with the closest known name. */
#ifndef EVALMESH_KINDS_TASK_SOURCES_H
#define EVALMESH_KINDS_TASK_SOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/tasks/task.h"

typedef struct em_task_load_options {
    int num_fewshot;       /* -1: each task's own */
    uint64_t fewshot_seed; /* lm-eval's fewshot random seed */
    size_t limit;          /* 0: every example; else, per task, lm-eval's first `limit`
                              documents, BIG-bench's max_examples */
    bool generative;       /* BIG-bench's generative-only tasks load (generate_until); else they
                              are refused by name and left out of folders and groups */
} em_task_load_options;

typedef struct em_task_source {
    const char *name; /* for messages and `evalmesh tasks` */
    bool (*claims)(const char *spec);
    /* Appends the task(s) spec names to *tasks (*count of them). */
    em_status (*load)(const char *spec, const em_task_load_options *options, em_task ***tasks,
                      size_t *count);
} em_task_source;

extern const em_task_source em_task_sources[];
extern const size_t em_task_source_count;

/* Whether spec names a file or folder (it has a '/' or ends in .yaml, .yml or .json), not a
 * task or group by name. */
bool em_task_spec_is_path(const char *spec);

/* Loads every task of specs (count) in order into *tasks (*task_count); an error names the spec. */
em_status em_tasks_load(const char *const *specs, size_t count, const em_task_load_options *options,
                        em_task ***tasks, size_t *task_count);
void em_tasks_free(em_task **tasks, size_t count);

#endif
