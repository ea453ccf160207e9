/* BIG-bench's multiple_choice_grade of one example, as json_task.py and task_metrics.py compute
 * it from the choices' log-likelihood sums (the absolute log-probabilities cond_log_prob gives):
 * the scores are the sums minus their logsumexp (scipy before 1.15: max + log(sum(exp(sums -
 * max))), NumPy's pairwise sum), or the sums as they are when the task sets
 * absolute_normalization; the chosen choice is task_metrics.argmax of the scores, whose ties go
 * to the sha256 of the scores' float64 bytes; the grade is the chosen choice's target score. */
#ifndef EVALMESH_TASKS_BIGBENCH_SCORING_H
#define EVALMESH_TASKS_BIGBENCH_SCORING_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/tasks/task.h"

/* scores (n >= 1) = the log_prob json_task ranks the choices by. */
void em_bigbench_scores(const double *sums, size_t n, bool absolute_normalization, double *scores);

/* task_metrics.argmax: the index of the largest score; among several equal largest, the k-th of
 * them (in index order) where k = int(sha256(little-endian float64 bytes of scores), 16) modulo
 * their number. */
size_t em_bigbench_argmax(const double *scores, size_t n);

/* multiple_choice_grade of example from its choices' sums (example->choice_count of them):
 * target_scores[chosen]; *chosen (may be NULL) the choice BIG-bench picks. */
double em_bigbench_grade(const em_task_example *example, const double *sums,
                         bool absolute_normalization, size_t *chosen);

#endif
