/* lm-evaluation-harness 0.4.13's filters for generated text (lm_eval/filters/), one row per
 * filter name as a task YAML's filter_list names them: regex (extraction.py RegexFilter:
 * re.findall, the group_select-th match, a tuple's first non-empty group, stripped; fallback
 * when nothing matches), remove_whitespace (str.strip), lowercase, uppercase, take_first (one
 * response per document: it passes the text on). A pipeline is one filter_list entry: its name
 * (the results' Filter column) and its steps in order. */
#ifndef EVALMESH_TASKS_OUTPUT_FILTERS_H
#define EVALMESH_TASKS_OUTPUT_FILTERS_H

#include <stddef.h>

#include "stages/tasks/python_regex.h"
#include "util/error.h"

/* lm-eval's RegexFilter defaults. */
#define EM_REGEX_FILTER_PATTERN "#### (\\-?[0-9\\.\\,]+)"
#define EM_REGEX_FILTER_FALLBACK "[invalid]"

struct em_output_filter_row;

typedef struct em_filter_step {
    const struct em_output_filter_row *row;
    em_python_regex *regex; /* regex: the compiled regex_pattern */
    long group_select;      /* regex: Python's index into the matches (negative from the end) */
    char *fallback;         /* regex */
} em_filter_step;

typedef struct em_output_filter_row {
    const char *name;
    const char *const *params; /* the keyword arguments it takes, NULL-terminated */
    /* *text replaced by the filter's output; an error is exit 4 (lm-eval raises there) */
    em_status (*apply)(const em_filter_step *step, char **text);
    char *(*str_method)(const char *text); /* remove_whitespace, lowercase, uppercase: Python's
                                              str.strip, str.lower, str.upper (python_str.h) */
} em_output_filter_row;

extern const em_output_filter_row em_output_filter_rows[];
extern const size_t em_output_filter_row_count;

/* The row named name, or NULL. */
const em_output_filter_row *em_output_filter_find(const char *name);

/* A regex step: pattern NULL and fallback NULL take lm-eval's defaults; `what` names the place
 * for errors. */
em_status em_filter_step_regex(const char *pattern, long group_select, const char *fallback,
                               const char *what, em_filter_step *out);

typedef struct em_filter_pipeline {
    char *name; /* lm-eval's filter name; "none" for the default (take_first) */
    em_filter_step *steps;
    size_t step_count;
} em_filter_pipeline;

/* The pipeline's answer for one response (malloc'd in *answer). */
em_status em_filter_pipeline_apply(const em_filter_pipeline *pipeline, const char *response,
                                   char **answer);
void em_filter_pipeline_clear(em_filter_pipeline *pipeline);

#endif
