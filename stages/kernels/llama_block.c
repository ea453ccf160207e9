/* The Llama composition over a backend's kernels (see llama_block.h). */
#include "stages/kernels/llama_block.h"

#include <stdlib.h>
#include <string.h>

/* x += the partial sums of every tp rank, gathered into all (tp, T, D) and added in rank order. */
static em_status sum_partials(const em_llama_kernels *k, void *b, const em_forward_group *tp,
                              float *all, int T, int dim) {
    size_t bytes = (size_t)T * (size_t)dim * sizeof(float);
    em_status err = em_forward_allgather(tp, k->partial(b), all, bytes);
    if (!err) k->add_partials(b, all, tp->size, T);
    return err;
}

/* The head across tp: every rank's tiles in rank order (each rank's block padded to the most
 * tiles a rank has), and the target logit from the rank whose rows hold the target. */
static em_status head(const em_llama_kernels *k, void *b, int64_t n_vocab,
                      const em_forward_group *tp, int threads, const int32_t *target, int from,
                      int n, double *nll, int32_t *argmax) {
    int64_t most = 0, row0, rows;
    for (int r = 0; r < tp->size; r++) {
        em_vocab_shard(n_vocab, tp->size, r, &row0, &rows);
        if (em_head_tiles(rows) > most) most = em_head_tiles(rows);
    }
    size_t block = (size_t)(most ? most : 1) * (size_t)n; /* tiles of one rank, (most, n) */
    em_head_tile *mine = calloc(block, sizeof *mine);
    em_head_tile *all = tp->size > 1 ? calloc(block * (size_t)tp->size, sizeof *all) : mine;
    float *logit = calloc((size_t)n * (size_t)(tp->size + 1), sizeof *logit); /* (n), (tp, n) */
    if (!mine || !all || !logit) {
        free(mine);
        if (all != mine) free(all);
        free(logit);
        return em_error_new(EM_EXIT_RUNTIME, "out of memory for the output head's tiles");
    }
    float *all_logits = logit + n;
    k->head_tiles(b, from, n, target + from, mine, logit);
    em_status err = NULL;
    if (tp->size > 1) {
        err = em_forward_allgather(tp, mine, all, block * sizeof *mine);
        if (!err) err = em_forward_allgather(tp, logit, all_logits, (size_t)n * sizeof *logit);
        /* close the gaps: rank r's tiles follow rank r-1's */
        int64_t next = 0;
        for (int r = 0; r < tp->size && !err; r++) {
            em_vocab_shard(n_vocab, tp->size, r, &row0, &rows);
            int64_t tiles = em_head_tiles(rows);
            memmove(all + (size_t)next * n, all + (size_t)r * block,
                    (size_t)tiles * (size_t)n * sizeof *all);
            next += tiles;
            for (int t = 0; t < n && !err; t++) {
                int32_t id = target[from + t];
                if (id >= row0 && id < row0 + rows) logit[t] = all_logits[(size_t)r * n + t];
            }
        }
    }
    if (!err) em_head_merge(all, em_head_tiles(n_vocab), n, logit, nll, argmax, threads);
    free(mine);
    if (all != mine) free(all);
    free(logit);
    return err;
}

em_status em_llama_compose_window(const em_llama_kernels *k, void *b, int n_layers, int dim,
                                  int64_t n_vocab, const em_forward_group *tp, int threads,
                                  const int32_t *input, const int32_t *target, int T,
                                  int score_from, double *nll, int32_t *argmax) {
    em_status err = k->begin(b, input, T);
    if (err) return err;
    bool split = tp->size > 1;
    float *all = NULL; /* (tp, T, D) gathered partial sums */
    if (split) {
        all = malloc((size_t)tp->size * (size_t)T * (size_t)dim * sizeof *all);
        if (!all)
            return em_error_new(EM_EXIT_RUNTIME, "out of memory for the tensor-parallel sums");
    }
    for (int l = 0; l < n_layers && !err; l++) {
        k->norm(b, l, false, T);
        k->qkv(b, l, T);
        k->attention(b, l, T);
        k->attn_out(b, l, T, split);
        if (split) err = sum_partials(k, b, tp, all, T, dim);
        if (err) break;
        k->norm(b, l, true, T);
        k->mlp(b, l, T, split);
        if (split) err = sum_partials(k, b, tp, all, T, dim);
    }
    free(all);
    if (err) return em_error_prefix(err, "tensor-parallel sum");
    return head(k, b, n_vocab, tp, threads, target, score_from, T - score_from, nll, argmax);
}
