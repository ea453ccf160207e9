/* A benchmark task as evalmesh scores it: a name, how its prompts were made (which format it
 * follows), and its examples in document order, each a context and the continuations (choices)
 * scored after it. Task sources (lm_eval_task.c: lm-evaluation-harness-style YAML over JSON
 * Lines; bigbench_task.c: BIG-bench task.json) build one; requests.c turns an example into token
 * ids, task_scoring.c turns the scores of its choices into metrics. */
#ifndef EVALMESH_TASKS_TASK_H
#define EVALMESH_TASKS_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/tasks/exact_match.h"
#include "stages/tasks/output_filters.h"
#include "stages/tasks/python_regex.h"
#include "util/error.h"

/* Whose prompt and scoring rules a task follows. */
typedef enum em_task_format {
    EM_TASK_FORMAT_LM_EVAL,  /* lm-evaluation-harness 0.4: context + target_delimiter + choice */
    EM_TASK_FORMAT_BIGBENCH, /* BIG-bench json_task.py: choices scored after the prompt as is */
} em_task_format;

/* What is scored for every example (lm-eval's output_type). */
typedef enum em_task_output {
    EM_TASK_MULTIPLE_CHOICE, /* one request per choice; acc, acc_norm, ... */
    EM_TASK_LOGLIKELIHOOD,   /* one request (the target); loglikelihood, perplexity, acc (greedy) */
    EM_TASK_GENERATE_UNTIL,  /* one greedy generation; exact_match (lm-eval: after its filter) or
                                exact_str_match (BIG-bench: after its post-processing) */
} em_task_output;

/* Metrics a task can ask for (its metric_list, or BIG-bench's preferred score). */
enum {
    EM_TASK_METRIC_ACC = 1u << 0,                   /* argmax of the sums is the gold choice */
    EM_TASK_METRIC_ACC_NORM = 1u << 1,              /* sums divided by the choice's characters */
    EM_TASK_METRIC_ACC_MUTUAL_INFO = 1u << 2,       /* sums minus the unconditional sums */
    EM_TASK_METRIC_MULTIPLE_CHOICE_GRADE = 1u << 3, /* BIG-bench: target_scores[argmax] */
    EM_TASK_METRIC_EXACT_MATCH = 1u << 4,           /* the gold continuation is the greedy one */
    EM_TASK_METRIC_LOGLIKELIHOOD = 1u << 5,         /* loglikelihood: the target's sum */
    EM_TASK_METRIC_PERPLEXITY = 1u << 6,            /* loglikelihood: exp(-mean of the sums) */
    EM_TASK_METRIC_EXACT_STR_MATCH = 1u << 7,       /* BIG-bench: the response is a target */
};

typedef struct em_task_example {
    size_t doc_index;      /* the document's place in its file (0-based) */
    char *context;         /* the whole prompt, few-shot examples included (UTF-8) */
    char **continuations;  /* choice_count: what is scored after the context; for lm-eval
                              target_delimiter + choice, for BIG-bench the choice as json_task
                              scores it */
    char **choices;        /* choice_count: the choices as the task names them (for acc_norm's
                              length and the samples file); generate_until: the targets, any of
                              which a response may match (continuations: the same strings) */
    size_t choice_count;   /* >= 1 */
    int gold;              /* index of the correct choice; -1 when only target_scores say */
    double *target_scores; /* choice_count BIG-bench target scores, or NULL */
    char *doc_json;        /* the document as one JSON object, for the samples file */
} em_task_example;

/* How a generate_until task asks for its text and scores it. */
typedef struct em_task_generation {
    char **until; /* stop strings: the text ends before the first of them (lm-eval's until; the
                     model's EOS stops it too) */
    size_t until_count;
    int max_gen_toks; /* the most tokens generated */
    /* lm-eval: the filter_list entry (its one pipeline) and exact_match's keyword arguments */
    em_filter_pipeline filter;
    em_exact_match_options exact_match;
    /* BIG-bench: postprocess_output's max_length (characters), stop_string (NULL: none) and
       output_regex (NULL: none) */
    size_t max_length;
    char *stop_string;
    em_python_regex *output_regex;
} em_task_generation;

typedef struct em_task {
    char *name;
    char *version; /* lm-eval's metadata.version, BIG-bench's "1.0.0" */
    char *group;   /* the group it was named through (bigbench_lite), or NULL */
    em_task_format format;
    em_task_output output;
    unsigned metrics; /* EM_TASK_METRIC_* */
    int num_fewshot;
    bool absolute_normalization;   /* BIG-bench: choices are ranked by their log-likelihood sums as
                                      they are, not normalized over the choices */
    em_task_generation generation; /* EM_TASK_GENERATE_UNTIL */
    em_task_example *examples;     /* in document order */
    size_t example_count;
} em_task;

void em_task_free(em_task *task);
void em_task_example_clear(em_task_example *example);
void em_task_generation_clear(em_task_generation *generation);

#endif
