/* The scores artifact: what a forward pass found for this rank's windows, folded as each window
 * finishes so that its size follows the windows, not the tokens: exact running sums over every
 * scored token of the rank (in window order, then position order), and per window its counts and
 * the sum of its NLLs. The per-token values themselves go to the run's window records
 * (stages/metrics/window_records.h), where the token file and a paired gate read them. */
#ifndef EVALMESH_SCORES_H
#define EVALMESH_SCORES_H

#include <stddef.h>
#include <stdint.h>

#include "runner/comm/exact_sum.h"

typedef struct em_window_score {
    int64_t window;      /* global window index */
    int32_t token_count; /* scored tokens */
    int64_t words;       /* from the dataset window */
    int64_t bytes;
    double nll_sum; /* its -log p(target) added in position order, one double */
} em_window_score;

typedef struct em_scores {
    size_t token_count; /* scored tokens on this rank */
    em_exact_sum nll;   /* -log p(target) of every scored token */
    em_exact_sum nll2;  /* its square */
    int64_t correct;    /* scored tokens whose argmax is the target */
    em_window_score *windows;
    size_t window_count;
    double seconds;   /* forward time on this rank */
    char *model_path; /* provenance, copied from the model and dataset */
    char *model_header_sha256;
    char *model_digest; /* the model's content digest (loaded_model.h) */
    char *dataset_path;
    char *dataset_sha256;
    const char *precision; /* the forward's `precision`, a static name ("exact", "ggml", "bf16") */
} em_scores;

/* Folds one finished window's n scored tokens into s's sums; returns their NLL added in position
 * order (the window's nll_sum). */
double em_scores_fold(em_scores *s, const double *nll, const int32_t *argmax, const int32_t *target,
                      int32_t n);
void em_scores_free(em_scores *s);

#endif
