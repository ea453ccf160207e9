/* lm-evaluation-harness 0.4.13's exact_match (lm_eval/api/metrics.py exact_match_hf_evaluate, a
 * port of Hugging Face evaluate's): both strings lose every match of each regexes_to_ignore
 * pattern (re.sub, in order), then with ignore_case are lowered (str.lower), with
 * ignore_punctuation lose string.punctuation's ASCII characters, with ignore_numbers lose the
 * ASCII digits; the score is 1 when they are then equal, else 0. */
#ifndef EVALMESH_TASKS_EXACT_MATCH_H
#define EVALMESH_TASKS_EXACT_MATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/tasks/python_regex.h"

typedef struct em_exact_match_options {
    bool ignore_case, ignore_punctuation, ignore_numbers;
    em_python_regex **regexes_to_ignore; /* regex_count, applied in order */
    size_t regex_count;
} em_exact_match_options;

/* 1.0 when prediction matches reference under options, else 0.0. */
double em_exact_match(const em_exact_match_options *options, const char *prediction,
                      const char *reference);

/* The string exact_match compares (malloc'd). */
char *em_exact_match_normalize(const em_exact_match_options *options, const char *text);

void em_exact_match_options_clear(em_exact_match_options *options);

#endif
