/* The statistics of a compare (kld_stats.h) printed on rank 0 as llama-perplexity
 * --kl-divergence lays them out: the perplexity block, the KL divergence block, the token
 * probability block (dp in percent points), so its users find every number where they expect it.
 * The same values are the compare stage's metrics in results.json. */
#ifndef EVALMESH_METRICS_KLD_SUMMARY_H
#define EVALMESH_METRICS_KLD_SUMMARY_H

#include <stdint.h>

#include "stages/metrics/kld_stats.h"

/* Prints, through em_log_summary, the statistics of candidate over tokens scored tokens. */
void em_kld_summary_print(const char *candidate, const em_kld_stats *s, int64_t tokens);

#endif
