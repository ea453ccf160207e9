/* Freeing the scores artifact (see scores.h). */
#include "stages/metrics/scores.h"

#include <stdlib.h>

void em_scores_free(em_scores *s) {
    if (!s) return;
    free(s->nll);
    free(s->argmax);
    free(s->target);
    free(s->windows);
    free(s->model_path);
    free(s->model_header_sha256);
    free(s->model_digest);
    free(s->dataset_path);
    free(s->dataset_sha256);
    free(s);
}
