/* Per-input-channel activation statistics of the linear layers of a model: what a `calibrate`
 * stage collects (the importance matrix of llama-imatrix, and what AWQ needs) and what the
 * quantize stage's importance-weighted and activation-aware methods read. One entry per weight
 * tensor, named by the tensor's GGUF name ("blk.3.attn_q.weight"); tensors that read the same
 * input (attn q/k/v; ffn gate/up) have entries with equal statistics. For input channel j of an
 * entry, over the `count` tokens that went through the layer:
 *   sum_x2[j]  = sum over tokens of x_j^2   (the imatrix value is sum_x2[j] / count)
 *   sum_abs[j] = sum over tokens of |x_j|   (AWQ's mean |x| is sum_abs[j] / count)
 *   max_abs[j] = max over tokens of |x_j|
 * Statistics read from a llama.cpp imatrix file carry only sum x^2 and counts: their sum_abs and
 * max_abs are NULL (has_abs false). */
#ifndef EVALMESH_QUANT_ACTIVATION_STATS_H
#define EVALMESH_QUANT_ACTIVATION_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/content_digest.h"

/* The artifact type name of a calibrate stage's output. */
#define EM_ACTIVATION_STATS_TYPE "activation_stats"

typedef struct em_activation_stat {
    char *name;      /* the weight tensor's GGUF name, e.g. "blk.0.ffn_down.weight" */
    int64_t columns; /* input channels: the weight's row length (GGUF ne[0]) */
    double *sum_x2;  /* (columns) sum of x^2 */
    double *sum_abs; /* (columns) sum of |x|; NULL when read from an imatrix file */
    float *max_abs;  /* (columns) max of |x|; NULL when read from an imatrix file */
    int64_t count;   /* tokens that went through the layer */
} em_activation_stat;

typedef struct em_activation_stats {
    em_activation_stat *entries; /* (n) in the model's tensor order */
    size_t n;
    bool has_abs;       /* sum_abs and max_abs present in every entry */
    int64_t tokens;     /* tokens the model ran over (each entry's count, for a dense model) */
    int64_t windows;    /* calibration windows (imatrix: chunk count) */
    int64_t window_len; /* tokens per window (imatrix: chunk size); 0 when unknown */
    char *dataset;      /* what it was calibrated on (a path or name); NULL when unknown */
} em_activation_stats;

/* The entry for a weight tensor's GGUF name, or NULL when there is none. */
const em_activation_stat *em_activation_stats_find(const em_activation_stats *s, const char *name);

/* The digest of the statistics' numbers (content_digest.h): the counts and, per entry, its name,
 * widths and arrays, so statistics computed or read from an imatrix file are told apart by what
 * they hold, whatever their file or dataset is called. */
void em_activation_stats_digest(const em_activation_stats *s, char hex[EM_DIGEST_HEX]);

/* Frees every entry and the struct itself; NULL is allowed. */
void em_activation_stats_free(em_activation_stats *s);

#endif
