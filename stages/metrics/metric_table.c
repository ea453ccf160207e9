/* The metric table (see metric_table.h): every metric the aggregate and compare stages set. */
#include "stages/metrics/metric_table.h"

#include <stddef.h>
#include <string.h>

#define LOWER EM_BETTER_LOWER
#define HIGHER EM_BETTER_HIGHER
#define UNPAIRED EM_PAIRING_NONE, EM_PER_TOKEN, 0
#define NLL_MEAN(per, factor) EM_PAIRING_NLL_MEAN, per, factor
#define NLL_EXP_MEAN(per) EM_PAIRING_NLL_EXP_MEAN, per, 0
#define ACCURACY EM_PAIRING_ACCURACY, EM_PER_TOKEN, 0

/* name, unit, better, timing, pairing (how, per, factor), error metric */
static const em_metric_def metric_table[] = {
    /* the aggregate stage: a forward stage's scores (stages/metrics/nll_stats.h) */
    {"token_ppl", "perplexity", LOWER, false, NLL_EXP_MEAN(EM_PER_TOKEN), "token_ppl_se"},
    {"token_ppl_se", "perplexity", LOWER, false, UNPAIRED, NULL},
    {"nll_mean", "nats/token", LOWER, false, NLL_MEAN(EM_PER_TOKEN, 1.0), NULL},
    {"word_ppl", "perplexity", LOWER, false, NLL_EXP_MEAN(EM_PER_WORD), NULL},
    {"byte_ppl", "perplexity", LOWER, false, NLL_EXP_MEAN(EM_PER_BYTE), NULL},
    {"bits_per_byte", "bits/byte", LOWER, false, NLL_MEAN(EM_PER_BYTE, 1.4426950408889634), NULL},
    {"token_accuracy", "fraction", HIGHER, false, ACCURACY, NULL},
    {"tokens", "tokens", LOWER, false, UNPAIRED, NULL},
    {"windows", "windows", LOWER, false, UNPAIRED, NULL},
    {"words", "words", LOWER, false, UNPAIRED, NULL},
    {"bytes", "bytes", LOWER, false, UNPAIRED, NULL},
    /* the aggregate stage: where the forward's time went */
    {"seconds", "s", LOWER, true, UNPAIRED, NULL},
    {"tokens_per_second", "tokens/s", HIGHER, true, UNPAIRED, NULL},
    {"slowest_rank", "rank", LOWER, true, UNPAIRED, NULL},
    {"fastest_rank", "rank", LOWER, true, UNPAIRED, NULL},
    {"rank_tokens_per_second_min", "tokens/s", HIGHER, true, UNPAIRED, NULL},
    {"rank_tokens_per_second_max", "tokens/s", HIGHER, true, UNPAIRED, NULL},
    /* the compare stage: a candidate against the reference (stages/metrics/kld_stats.h) */
    {"ppl", "perplexity", LOWER, false, UNPAIRED, NULL},
    {"ppl_base", "perplexity", LOWER, false, UNPAIRED, NULL},
    {"ln_ppl_ratio", "nats/token", LOWER, false, UNPAIRED, NULL},
    {"ppl_ratio", "ratio", LOWER, false, UNPAIRED, NULL},
    {"ppl_diff", "perplexity", LOWER, false, UNPAIRED, NULL},
    {"ln_ppl_correlation", "correlation", HIGHER, false, UNPAIRED, NULL},
    {"kld_mean", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_max", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_min", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p99_9", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p99", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p95", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p90", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p50", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p10", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p05", "nats", LOWER, false, UNPAIRED, NULL},
    {"kld_p01", "nats", LOWER, false, UNPAIRED, NULL},
    {"dp_mean", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_rms", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_max", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_min", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p99_9", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p99", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p95", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p90", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p75", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p50", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p25", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p10", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p05", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p01", "probability", LOWER, false, UNPAIRED, NULL},
    {"dp_p00_1", "probability", LOWER, false, UNPAIRED, NULL},
    {"same_top", "fraction", HIGHER, false, UNPAIRED, NULL},
    /* the task stage: "<stage>/<task>.<metric>", lm-eval's names (stages/tasks/task_scoring.h) */
    {"acc", "fraction", HIGHER, false, UNPAIRED, "acc_stderr"},
    {"acc_stderr", "fraction", LOWER, false, UNPAIRED, NULL},
    {"acc_norm", "fraction", HIGHER, false, UNPAIRED, "acc_norm_stderr"},
    {"acc_norm_stderr", "fraction", LOWER, false, UNPAIRED, NULL},
    {"acc_mutual_info", "fraction", HIGHER, false, UNPAIRED, "acc_mutual_info_stderr"},
    {"acc_mutual_info_stderr", "fraction", LOWER, false, UNPAIRED, NULL},
    {"multiple_choice_grade", "score", HIGHER, false, UNPAIRED, "multiple_choice_grade_stderr"},
    {"multiple_choice_grade_stderr", "score", LOWER, false, UNPAIRED, NULL},
    {"exact_match", "fraction", HIGHER, false, UNPAIRED, "exact_match_stderr"},
    {"exact_match_stderr", "fraction", LOWER, false, UNPAIRED, NULL},
    {"exact_str_match", "fraction", HIGHER, false, UNPAIRED, "exact_str_match_stderr"},
    {"exact_str_match_stderr", "fraction", LOWER, false, UNPAIRED, NULL},
    {"loglikelihood", "nats", HIGHER, false, UNPAIRED, "loglikelihood_stderr"},
    {"loglikelihood_stderr", "nats", LOWER, false, UNPAIRED, NULL},
    {"perplexity", "perplexity", LOWER, false, UNPAIRED, NULL},
    {"examples", "examples", LOWER, false, UNPAIRED, NULL},
};

const em_metric_def *em_metric_def_find(const char *name) {
    for (size_t i = 0; i < sizeof metric_table / sizeof *metric_table; i++)
        if (strcmp(metric_table[i].name, name) == 0) return &metric_table[i];
    return NULL;
}

const em_metric_def *em_metric_def_of_key(const char *key) {
    const char *dot = strchr(key, '.');
    return dot ? em_metric_def_find(dot + 1) : NULL;
}

const em_metric_def *em_metric_def_error_of(const char *name) {
    for (size_t i = 0; i < sizeof metric_table / sizeof *metric_table; i++)
        if (metric_table[i].error && strcmp(metric_table[i].error, name) == 0)
            return &metric_table[i];
    return NULL;
}

bool em_metric_higher_is_better(const char *key) {
    const em_metric_def *def = em_metric_def_of_key(key);
    return def && def->better == EM_BETTER_HIGHER;
}
