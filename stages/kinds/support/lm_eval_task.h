/* lm-evaluation-harness-style tasks on local files: a task YAML (lm-eval 0.4's TaskConfig keys
 * that matter for multiple_choice, loglikelihood and generate_until tasks: for the last also
 * generation_kwargs, filter_list and exact_match's arguments) over JSON Lines data, loaded into an
 * em_task whose contexts and continuations are the strings lm-eval 0.4.13 builds
 * (ConfigurableTask.fewshot_context and construct_requests; its ContextSampler draws the
 * few-shot documents with Python's random.Random(fewshot_seed)). docs/tasks.md lists the keys,
 * the template subset and where evalmesh differs. Every error is exit 2 and names its place:
 * the YAML's file:line:col, or the data file's line and the document's index. */
#ifndef EVALMESH_LM_EVAL_TASK_H
#define EVALMESH_LM_EVAL_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/tasks/task.h"
#include "util/error.h"

/* lm-eval's default few-shot seed (simple_evaluate's fewshot_random_seed). */
#define EM_LM_EVAL_FEWSHOT_SEED 1234

/* Loads the task at yaml_path. num_fewshot: -1 takes the YAML's (0 when it has none), N >= 0
 * overrides it unless the YAML sets 0 (lm-eval's simple_evaluate keeps that 0);
 * limit: 0 takes every document of the evaluation split, else its first `limit` (the few-shot
 * draws are those of a whole run's first documents, as lm-eval's --limit gives). */
em_status em_lm_eval_task_load(const char *yaml_path, int num_fewshot, uint64_t fewshot_seed,
                               size_t limit, em_task **out);

/* Whether a task argument names an lm-eval task YAML (it ends in .yaml or .yml). */
bool em_lm_eval_task_path(const char *arg);

#endif
