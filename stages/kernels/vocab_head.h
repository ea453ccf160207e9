/* What the output head keeps of the logits, shared by every backend and by the tensor-parallel
 * composition: per position and per vocabulary tile of EM_HEAD_TILE_ROWS rows, the tile's max
 * logit, its sum of exp(logit - max) and its first argmax. Merging the tiles in vocabulary order
 * gives -log softmax(target) and the argmax; as tiles never straddle two tensor-parallel shards
 * (em_vocab_shard cuts between tiles), the tp ranks' tiles concatenated in rank order are the
 * tiles of tp = 1, and the head's results are bit-identical for every tp. */
#ifndef EVALMESH_KERNELS_VOCAB_HEAD_H
#define EVALMESH_KERNELS_VOCAB_HEAD_H

#include <stdint.h>

#define EM_HEAD_TILE_ROWS 192 /* a multiple of the GEMM's row block (gemm.h) */

typedef struct em_head_tile {
    double sum_exp; /* sum over the tile of exp(logit - max) */
    float max;      /* the tile's largest logit */
    int32_t argmax; /* its first index (global id) */
} em_head_tile;

/* Tiles of a vocabulary of n_vocab rows. */
int64_t em_head_tiles(int64_t n_vocab);

/* The rows [*row0, *row0 + *rows) of rank r of tp: whole tiles, as even as tiles allow. */
void em_vocab_shard(int64_t n_vocab, int tp, int r, int64_t *row0, int64_t *rows);

/* nll[t] = M + log S - target_logit[t] and argmax[t] for T positions from part (tiles, T): M the
 * largest tile max (the first tile wins ties), S = sum_v sum_exp_v exp(max_v - M) in tile order;
 * nll NULL: argmax alone. */
void em_head_merge(const em_head_tile *part, int64_t tiles, int T, const float *target_logit,
                   double *nll, int32_t *argmax, int threads);

/* A compared pair's partials of one tile (pair_head.h), per position: each head's max m and sum
 * of exp(l - m) over the tile, and A = sum exp(l_ref - m_ref) (l_ref - l_cand). */
typedef struct em_pair_tile {
    double sum_ref, sum_cand, a;
    float max_ref, max_cand;
} em_pair_tile;

/* kl[t] = KL(P_ref || P_cand) for T positions from part (tiles, T), merged in tile order:
 * A / S_ref - lse_ref + lse_cand with every tile rescaled to the largest max. */
void em_pair_merge(const em_pair_tile *part, int64_t tiles, int T, double *kl);

#endif
