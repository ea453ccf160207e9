/* Both output heads of a compared pair over the same positions, without (T, vocab) logits: each
 * head's -log softmax(target) and argmax exactly as the single head gives them (output_head.h:
 * the same tile logits and partials, merged the same way), and the KL divergence
 *   KL(P_ref || P_cand)[t] = sum_v p_ref[v] (l_ref[v] - l_cand[v]) - lse_ref[t] + lse_cand[t]
 * walking the vocabulary in tiles of EM_HEAD_TILE_ROWS rows of both output weights together. Per
 * tile and position it keeps each head's max m, its sum of exp(l - m) and, for the reference,
 * A = sum exp(l_ref - m_ref) (l_ref - l_cand) (exponentials and products in double); the tiles
 * are merged in vocabulary order with the max rescaling of vocab_head.h, so the result does not
 * depend on the thread count. Two bit-identical heads give exactly 0 (every l_ref - l_cand is 0
 * and the log-sum-exps are equal). Memory: T x tiles x 32 bytes of partials. */
#ifndef EVALMESH_KERNELS_PAIR_HEAD_H
#define EVALMESH_KERNELS_PAIR_HEAD_H

#include "util/error.h"
#include "stages/kernels/cpu/scratch.h"
#include "stages/model/loaded_model.h"

/* One side of the pair: x (T, D) after the final norm, the whole output weight {D, n_vocab}, its
 * logit soft-cap (0: none) and the forward's scratch (holding em_output_head_scratch_floats(T, D)
 * per thread; its packed buffer is overwritten); nll and argmax (T) receive its scores. Both
 * sides have the same thread count. */
typedef struct em_pair_side {
    const float *x;
    const em_tensor *w;
    float softcap;
    em_scratch *scratch;
    double *nll;
    int32_t *argmax;
} em_pair_side;

/* Each side's nll and argmax of target (T ids) and kl (T) of ref against cand; both weights must
 * have the same vocabulary. */
em_status em_pair_head(const em_pair_side *ref, const em_pair_side *cand, const int32_t *target,
                       int T, double *kl);

#endif
