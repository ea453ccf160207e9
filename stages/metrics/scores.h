/* The scores artifact: what a forward pass found for this rank's windows, per scored token and
 * per window, before any reduction. Token entries are in window order, then position order. */
#ifndef EVALMESH_SCORES_H
#define EVALMESH_SCORES_H

#include <stddef.h>
#include <stdint.h>

typedef struct em_window_score {
    int64_t window;      /* global window index */
    size_t first_token;  /* offset of its first scored token in the token arrays */
    int32_t token_count; /* scored tokens */
    int64_t words;       /* from the dataset window */
    int64_t bytes;
} em_window_score;

typedef struct em_scores {
    size_t token_count; /* scored tokens on this rank */
    double *nll;        /* (token_count) -log p(target) */
    int32_t *argmax;    /* (token_count) the most likely token */
    int32_t *target;    /* (token_count) the token that came */
    em_window_score *windows;
    size_t window_count;
    double seconds;   /* forward time on this rank */
    char *model_path; /* provenance, copied from the model and dataset */
    char *model_header_sha256;
    char *model_digest; /* the model's content digest (loaded_model.h) */
    char *dataset_path;
    char *dataset_sha256;
} em_scores;

void em_scores_free(em_scores *s);

#endif
