/* Greedy decoding of 8 generated prompts through a backend's decoding entry points
 * (forward_backend.h's decode_new, prefill, step) in several batchings, for the tests that check
 * each sequence's tokens and logits do not depend on the batching (test_forward_decode.c on the
 * cpu forward, tests/gpu/cuda_decode_check.c on the cuda one). Prompts of 1 to 130 ids (inside
 * the first attention block, on its edge, across blocks), each decoded for STEPS tokens, its own
 * argmax fed back. */
#ifndef EVALMESH_TEST_DECODE_BATCHINGS_H
#define EVALMESH_TEST_DECODE_BATCHINGS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/forward_backend.h"
#include "kernels/test_windows.h"

#define SEQUENCES 8
#define STEPS 6
#define BATCHINGS 5
#define DECODE_POSITIONS 160 /* each slot's positions: the longest prompt and its steps fit */

static const int prompt_lengths[SEQUENCES] = {1, 3, 17, 40, 64, 65, 100, 130};

/* Each batching: groups of sequences (-1 ends a group, -2 the batching), prefilled group by group
 * and then stepped group by group, step after step: all together, each alone, reversed, groups of
 * three, other groups (the groups' steps interleaved in one cache). */
static const int batchings[BATCHINGS][SEQUENCES * 2 + 1] = {
    {0, 1, 2, 3, 4, 5, 6, 7, -1, -2},
    {0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7, -1, -2},
    {7, 6, 5, 4, 3, 2, 1, 0, -1, -2},
    {0, 3, 6, -1, 1, 4, 7, -1, 2, 5, -1, -2},
    {7, 0, -1, 5, 2, 4, -1, 1, 3, 6, -1, -2},
};

typedef struct decoded {
    int32_t tokens[SEQUENCES][STEPS];
    float *logits; /* (SEQUENCES, STEPS, V) */
} decoded;

/* The prompts: SEQUENCES windows of prompt_lengths ids below V. */
static inline void make_prompts(window *prompts, int V) {
    for (int s = 0; s < SEQUENCES; s++) make_window(&prompts[s], prompt_lengths[s], 0, 11u + s, V);
}

static inline float *logits_at(const decoded *d, int s, int step, int V) {
    return d->logits + ((size_t)s * STEPS + (size_t)step) * (size_t)V;
}

/* A failure of the entry points ends the test (exit 1) with its message. */
static inline void decode_must(em_status err, const char *what) {
    if (!err) return;
    fprintf(stderr, "%s: %s\n", what, err->message);
    exit(1);
}

/* Decodes every sequence through batching b of backend be's forward f into out; returns the
 * cache's bytes (decode_memory) at the end. */
static inline size_t decode_batching(const em_forward_backend *be, void *f, const window *prompts,
                                     int b, int V, decoded *out) {
    void *d;
    decode_must(be->decode_new(f, SEQUENCES, DECODE_POSITIONS, &d), "decode_new");
    int groups[SEQUENCES][SEQUENCES], sizes[SEQUENCES] = {0}, count = 0;
    for (const int *p = batchings[b]; *p != -2; p++) {
        if (*p == -1)
            count++;
        else
            groups[count][sizes[count]++] = *p;
    }
    float *row = malloc((size_t)SEQUENCES * (size_t)V * sizeof *row);
    for (int step = 0; step < STEPS; step++) {
        for (int g = 0; g < count; g++) {
            int n = sizes[g];
            int32_t next[SEQUENCES], tokens[SEQUENCES];
            if (step == 0) {
                const int32_t *ids[SEQUENCES];
                int lengths[SEQUENCES];
                for (int i = 0; i < n; i++) {
                    ids[i] = prompts[groups[g][i]].ids;
                    lengths[i] = prompts[groups[g][i]].T;
                }
                decode_must(be->prefill(d, groups[g], ids, lengths, n, next, row), "prefill");
            } else {
                for (int i = 0; i < n; i++) tokens[i] = out->tokens[groups[g][i]][step - 1];
                decode_must(be->step(d, groups[g], tokens, n, next, row), "decoding step");
            }
            for (int i = 0; i < n; i++) {
                out->tokens[groups[g][i]][step] = next[i];
                memcpy(logits_at(out, groups[g][i], step, V), row + (size_t)i * V,
                       (size_t)V * sizeof *row);
            }
        }
    }
    size_t bytes = be->decode_memory(d);
    free(row);
    be->decode_free(d);
    return bytes;
}

/* seq (room for TEST_WINDOW_MAX_T + STEPS + 1 ids) = sequence s's prompt, then its first `step`
 * tokens in d, then a 0 (a target for its last position); returns its length without the 0. */
static inline int sequence_so_far(const window *prompts, const decoded *d, int s, int step,
                                  int32_t *seq) {
    int L = prompts[s].T;
    memcpy(seq, prompts[s].ids, (size_t)L * sizeof *seq);
    memcpy(seq + L, d->tokens[s], (size_t)step * sizeof *seq);
    seq[L + step] = 0;
    return L + step;
}

/* Whether a and b hold the same tokens and logits bits. */
static inline bool decoded_same(const decoded *a, const decoded *b, int V) {
    return memcmp(a->tokens, b->tokens, sizeof a->tokens) == 0 &&
           memcmp(a->logits, b->logits, (size_t)SEQUENCES * STEPS * V * sizeof(float)) == 0;
}

#endif
