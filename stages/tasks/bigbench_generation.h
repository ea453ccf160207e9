/* BIG-bench 1.0.0's scoring of a generated text: bigbench/models/model_utils.py postprocess_output
 * (the text cut to max_length characters, then after the first stop_string when it starts past
 * the first character, then the first re.findall match of output_regex, "" when none; json_task.py
 * takes the regex [^\.\?\!\;\n]+ when the task sets neither) and task_metrics.py
 * exact_str_match_fn (1 when the response is one of the example's targets). BIG-bench's Hugging
 * Face model generates max_length = 256 tokens and cuts the text to 256 characters. */
#ifndef EVALMESH_TASKS_BIGBENCH_GENERATION_H
#define EVALMESH_TASKS_BIGBENCH_GENERATION_H

#include <stddef.h>

#include "stages/tasks/python_regex.h"
#include "util/error.h"

/* json_task.py's _DEFAULT_REGEX and huggingface_models.py's default max_length. */
#define EM_BIGBENCH_DEFAULT_OUTPUT_REGEX "[^\\.\\?\\!\\;\\n]+"
#define EM_BIGBENCH_MAX_LENGTH 256

/* A task's output_regex compiled; more than one group is refused (postprocess_output asserts a
 * match is no tuple). */
em_status em_bigbench_output_regex(const char *pattern, const char *what, em_python_regex **out);

/* postprocess_output(text, max_length, stop_string, output_regex) (malloc'd); max_length 0,
 * stop_string NULL or "", output_regex NULL: that step is skipped, as in Python. */
char *em_bigbench_postprocess(const char *text, size_t max_length, const char *stop_string,
                              const em_python_regex *output_regex);

/* exact_str_match of one example: 1.0 when response equals one of targets (n), else 0.0. */
double em_bigbench_exact_str_match(const char *response, const char *const *targets, size_t n);

#endif
