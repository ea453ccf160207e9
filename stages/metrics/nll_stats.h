/* Perplexity metrics from global totals of per-token negative log-likelihoods (natural log):
 *   token_ppl      exp(sum_nll / tokens)
 *   token_ppl_se   llama.cpp's standard error: sqrt((E[nll^2] - E[nll]^2) / (tokens - 1)) * ppl
 *   nll_mean       sum_nll / tokens
 *   word_ppl       exp(sum_nll / words)           (lm-evaluation-harness weighted perplexity)
 *   byte_ppl       exp(sum_nll / bytes)
 *   bits_per_byte  sum_nll / bytes / ln 2
 *   token_accuracy correct / tokens
 * Every input is an exact global total (an exact sum rounded once, or an integer count), so
 * these are the same bits on every rank and for every world size. */
#ifndef EVALMESH_NLL_STATS_H
#define EVALMESH_NLL_STATS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct em_nll_totals {
    double sum_nll;
    double sum_nll2;
    int64_t tokens;
    int64_t words; /* 0 when unknown (word perplexity is then not defined) */
    int64_t bytes; /* 0 when unknown */
    int64_t correct;
} em_nll_totals;

typedef struct em_nll_stats {
    double token_ppl, token_ppl_se, nll_mean, token_accuracy;
    bool has_se; /* at least 2 tokens and a positive variance */
    double word_ppl;
    bool has_words;
    double byte_ppl, bits_per_byte;
    bool has_bytes;
} em_nll_stats;

/* Needs t->tokens > 0. */
em_nll_stats em_nll_stats_compute(const em_nll_totals *t);

#endif
