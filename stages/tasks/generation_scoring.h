/* A generate_until example from both ends of the decoder: what to generate (the prompt, the stop
 * strings, the most tokens) and, from the generated text, its answer and score: lm-eval's filter
 * pipeline then exact_match against the target (lm_eval/api/task.py process_results), or
 * BIG-bench's postprocess_output then exact_str_match against its targets. The outcome is an
 * em_example_outcome like a multiple-choice example's, so task metrics (mean and mean_stderr),
 * groups, records and the paired gate take it as they are. */
#ifndef EVALMESH_TASKS_GENERATION_SCORING_H
#define EVALMESH_TASKS_GENERATION_SCORING_H

#include <stddef.h>

#include "stages/tasks/task.h"
#include "stages/tasks/task_scoring.h"
#include "util/error.h"

/* What the decoder is asked for one example (pointers into task and example). */
typedef struct em_generation_request {
    const char *context; /* the prompt, few-shot examples included */
    char *const *until;  /* stop strings, matched on the decoded text, not kept */
    size_t until_count;
    int max_gen_toks; /* the most tokens generated */
} em_generation_request;

void em_generation_request_of(const em_task *task, const em_task_example *example,
                              em_generation_request *out);

/* Scores the text generated for example (the continuation alone, the stop string left out):
 * *answer (malloc'd) is the filtered or post-processed text, out its metric values
 * (out->exact_match; prediction 0). An error is exit 4 (a regex filter's group_select beyond
 * the matches, where lm-eval raises). */
em_status em_generation_score(const em_task *task, const em_task_example *example,
                              const char *generated, char **answer, em_example_outcome *out);

#endif
