/* BIG-bench's tasks by name: where tools/fetch-bigbench unpacks the bigbench 1.0.0 sdist's
 * benchmark_tasks, the folder of a task named there, and the named groups of tasks. Their prompts
 * follow BIG-bench's own format (bigbench_task.h), not lm-evaluation-harness's bigbench tasks,
 * which read a Hugging Face copy with stripped inputs. */
#ifndef EVALMESH_TASKS_BIGBENCH_CATALOG_H
#define EVALMESH_TASKS_BIGBENCH_CATALOG_H

#include <stddef.h>

#include "util/error.h"

/* The folder tools/fetch-bigbench prints: $EVALMESH_CACHE (else ~/.cache/evalmesh) +
 * "/bigbench-1.0.0/benchmark_tasks". The caller frees it. */
char *em_bigbench_tasks_dir(void);

/* *path = tasks_dir/name, the folder of the task called name (its task.json inside, or subtask
 * folders). An unknown name is exit 2 naming the closest task there is; a missing tasks_dir is
 * exit 2 saying to run tools/fetch-bigbench. The caller frees *path. */
em_status em_bigbench_find(const char *tasks_dir, const char *name, char **path);

/* The tasks of a group, NULL-terminated, or NULL when name is no group. "bigbench_lite":
 * BIG-bench Lite (bigbench/bbseqio/bigbench_lite.py, bigbench_lite_v1), its members scored by
 * multiple choice. */
const char *const *em_bigbench_group(const char *name);

/* The name of group i (0, 1, ...), NULL past the last. */
const char *em_bigbench_group_name(size_t i);

/* The JSON tasks in tasks_dir (folders holding a task.json), sorted by name: *names (*count),
 * freed by the caller (each, then the array). A missing tasks_dir is exit 2 saying to run
 * tools/fetch-bigbench. */
em_status em_bigbench_list(const char *tasks_dir, char ***names, size_t *count);

#endif
