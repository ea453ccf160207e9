/* A BIG-bench JSON task (task.json) as an em_task, its prompts made as BIG-bench 1.0.0's
 * bigbench/api/json_task.py makes them: default_format_fn (task_prefix, example_input_prefix,
 * the choices sorted then permuted by np.random.RandomState(42) re-seeded for every example and
 * appended after choice_prefix unless append_choices_to_input is false in Python's sense,
 * example_output_prefix), duplicate examples dropped, then make_nshot_dataset (few-shot examples
 * drawn from one RandomState(42), joined by few_shot_example_separator). The continuations are
 * the target_scores keys in the file's order, scored right after the prompt (no delimiter), as
 * json_task passes them to cond_log_prob. Generative-only tasks (exact_str_match) load with
 * options->generative: the prompt without choices, the targets to match, the post-processing of
 * bigbench_generation.h; otherwise they are refused. */
#ifndef EVALMESH_TASKS_BIGBENCH_TASK_H
#define EVALMESH_TASKS_BIGBENCH_TASK_H

#include <stddef.h>

#include "stages/tasks/task.h"
#include "util/error.h"

typedef struct em_bigbench_options {
    int num_fewshot; /* examples put before every query (BIG-bench's shots) */
    size_t limit;    /* 0: every example; N: the examples BIG-bench evaluates with
                        max_examples = N, for each task or subtask (for 0 shots a random N of
                        them, for few shots the first N queries it draws) */
    bool generative; /* generative-only tasks load as generate_until tasks scored by
                        exact_str_match (else they are refused, or left out of a folder) */
} em_bigbench_options;

/* Loads the task at path (a task.json, or the folder holding it). A task.json without examples
 * has its subtasks in folders beside it: one em_task per subtask, in the order of their paths,
 * named "task:subtask" after the "name" fields; generative-only subtasks are left out (and
 * named in a warning). *tasks (*count of them) are freed with em_task_free each, then free.
 * Errors are exit 2: a malformed file (file:line:col), a missing or wrongly typed field (named,
 * with the example's index), a generative-only task, too few examples for the shots. */
em_status em_bigbench_load(const char *path, const em_bigbench_options *options, em_task ***tasks,
                           size_t *count);

#endif
