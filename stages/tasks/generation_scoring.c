/* A generate_until example's request and the scoring of its generated text
 * (generation_scoring.h). */
#include "stages/tasks/generation_scoring.h"

#include <string.h>

#include "stages/tasks/bigbench_generation.h"

void em_generation_request_of(const em_task *task, const em_task_example *example,
                              em_generation_request *out) {
    out->context = example->context;
    out->until = task->generation.until;
    out->until_count = task->generation.until_count;
    out->max_gen_toks = task->generation.max_gen_toks;
}

em_status em_generation_score(const em_task *task, const em_task_example *example,
                              const char *generated, char **answer, em_example_outcome *out) {
    memset(out, 0, sizeof *out);
    const em_task_generation *g = &task->generation;
    if (task->format == EM_TASK_FORMAT_BIGBENCH) {
        *answer =
            em_bigbench_postprocess(generated, g->max_length, g->stop_string, g->output_regex);
        out->exact_match = em_bigbench_exact_str_match(
            *answer, (const char *const *)example->choices, example->choice_count);
        return NULL;
    }
    em_status err = em_filter_pipeline_apply(&g->filter, generated, answer);
    if (err) return err;
    /* process_results: with several targets, 1 when any matches */
    for (size_t i = 0; i < example->choice_count && !out->exact_match; i++)
        out->exact_match = em_exact_match(&g->exact_match, *answer, example->choices[i]);
    return NULL;
}
