/* Folding finished windows into the scores artifact, and freeing it (see scores.h). */
#include "stages/kinds/support/scores.h"

#include <stdlib.h>

double em_scores_fold(em_scores *s, const double *nll, const int32_t *argmax, const int32_t *target,
                      int32_t n) {
    double sum = 0;
    for (int32_t k = 0; k < n; k++) {
        em_exact_sum_add(&s->nll, nll[k]);
        em_exact_sum_add(&s->nll2, nll[k] * nll[k]);
        if (argmax[k] == target[k]) s->correct++;
        sum += nll[k];
    }
    s->token_count += (size_t)n;
    return sum;
}

void em_scores_free(em_scores *s) {
    if (!s) return;
    free(s->windows);
    free(s->model_path);
    free(s->model_header_sha256);
    free(s->model_digest);
    free(s->dataset_path);
    free(s->dataset_sha256);
    free(s);
}
