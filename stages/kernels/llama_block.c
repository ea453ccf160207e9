/* The Llama composition over a backend's kernels (see llama_block.h). */
#include "stages/kernels/llama_block.h"

#include <stdlib.h>
#include <string.h>

#include "util/heartbeat.h"

/* x += the partial sums of every tp rank, gathered into all (tp, T, D) and added in rank order. */
static em_status sum_partials(const em_llama_kernels *k, void *b, const em_forward_group *tp,
                              float *all, int T, int dim) {
    size_t bytes = (size_t)T * (size_t)dim * sizeof(float);
    em_status err = em_forward_allgather(tp, k->partial(b), all, bytes);
    if (!err) k->add_partials(b, all, tp->size, T);
    return err ? em_error_prefix(err, "tensor-parallel sum") : NULL;
}

/* The head of rows from .. from+n-1 with targets target (n), across tp: every rank's tiles in
 * rank order (each rank's block padded to the most tiles a rank has), and the target logit from
 * the rank whose rows hold the target. target NULL: the argmax alone (nll untouched). */
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
    k->head_tiles(b, from, n, target, mine, logit);
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
            for (int t = 0; t < n && !err && target; t++) {
                int32_t id = target[t];
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

/* The end of the run of windows from w whose scored rows follow each other (each later window
 * scored from its first position) and which all have targets or all lack them: one head call
 * scores them all, as the head's numbers per position do not depend on the others (so a batch of
 * decoding steps reads the output weight once, not once per sequence). */
static int heads_end(const em_batch_window *windows, int count, int w) {
    int end = w + 1;
    while (end < count && windows[end].nll && windows[end].score_from == 0 &&
           !windows[end].target == !windows[w].target)
        end++;
    return end;
}

/* The heads of windows [w, end) (heads_end's run, rows from start[w]) in one call: their targets
 * side by side, the results handed back to each window. */
static em_status heads(const em_llama_kernels *k, void *b, int64_t n_vocab,
                       const em_forward_group *tp, int threads, const em_batch_window *windows,
                       const int32_t *start, int w, int end) {
    const em_batch_window *first = &windows[w];
    int from = start[w] + first->score_from, n = start[end] - from;
    if (end == w + 1)
        return head(k, b, n_vocab, tp, threads,
                    first->target ? first->target + first->score_from : NULL, from, n,
                    first->target ? first->nll : NULL, first->argmax);
    int32_t *target = first->target ? em_xmalloc((size_t)n * sizeof *target) : NULL;
    double *nll = em_xmalloc((size_t)n * sizeof *nll);
    int32_t *argmax = em_xmalloc((size_t)n * sizeof *argmax);
    for (int i = w, at = 0; i < end && target; i++) {
        int scored = windows[i].T - windows[i].score_from;
        memcpy(target + at, windows[i].target + windows[i].score_from,
               (size_t)scored * sizeof *target);
        at += scored;
    }
    em_status err = head(k, b, n_vocab, tp, threads, target, from, n, target ? nll : NULL, argmax);
    for (int i = w, at = 0; i < end && !err; i++) {
        int scored = windows[i].T - windows[i].score_from;
        if (target) memcpy(windows[i].nll, nll + at, (size_t)scored * sizeof *nll);
        memcpy(windows[i].argmax, argmax + at, (size_t)scored * sizeof *argmax);
        at += scored;
    }
    free(target);
    free(nll);
    free(argmax);
    return err;
}

int em_cp_positions(int T, int cp, int r, int32_t *positions) {
    int blocks = 2 * cp, n = 0;
    int which[2] = {r, blocks - 1 - r};
    for (int i = 0; i < 2; i++) {
        int p0 = (int)((int64_t)T * which[i] / blocks);
        int p1 = (int)((int64_t)T * (which[i] + 1) / blocks);
        for (int p = p0; p < p1; p++, n++)
            if (positions) positions[n] = p;
    }
    return n;
}

/* The most positions a rank of cp holds in a window of T, and of those at or after score_from. */
static int most_positions(int T, int cp, int score_from, bool scored_only) {
    int most = 0;
    int32_t *pos = em_xmalloc((size_t)T * sizeof *pos);
    for (int r = 0; r < cp; r++) {
        int n = em_cp_positions(T, cp, r, pos), count = 0;
        for (int i = 0; i < n; i++) count += !scored_only || pos[i] >= score_from;
        if (count > most) most = count;
    }
    free(pos);
    return most;
}

/* Ring attention over the cp group: this rank's queries (T at positions pos) against every
 * rank's K/V block, its own first, then the blocks arriving from the previous rank. A block in
 * flight is its count, positions and K and V, sized for the largest block (most positions). */
static em_status ring_attention(const em_llama_kernels *k, void *b, int layer,
                                const em_forward_group *cp, int T, const int32_t *pos, int most) {
    float *kl, *vl;
    int kvd;
    k->local_kv(b, &kl, &vl, &kvd);
    size_t floats = (size_t)most * (size_t)kvd;
    size_t head = sizeof(int32_t) * (size_t)(1 + most); /* count, then positions */
    size_t bytes = head + 2 * floats * sizeof(float);
    char *send = malloc(bytes), *recv = malloc(bytes);
    if (!send || !recv) {
        free(send);
        free(recv);
        return em_error_new(EM_EXIT_RUNTIME, "out of memory for the K/V blocks of the cp ring");
    }
    int32_t *count = (int32_t *)send;
    count[0] = T;
    memcpy(count + 1, pos, (size_t)T * sizeof *pos);
    memcpy(send + head, kl, (size_t)T * kvd * sizeof(float));
    memcpy(send + head + floats * sizeof(float), vl, (size_t)T * kvd * sizeof(float));
    k->attention_block(b, layer, T, pos, kl, vl, pos, T, true);
    em_status err = NULL;
    for (int step = 1; step < cp->size && !err; step++) {
        err = em_forward_ring_step(cp, send, recv, bytes);
        if (err) break;
        const int32_t *in = (const int32_t *)recv;
        const float *rk = (const float *)(recv + head);
        k->attention_block(b, layer, T, pos, rk, rk + floats, in + 1, in[0], false);
        char *t = send;
        send = recv;
        recv = t;
    }
    free(send);
    free(recv);
    if (!err) k->attention_finish(b, T);
    return err ? em_error_prefix(err, "cp ring") : NULL;
}

/* One scored position as the cp ranks exchange it. */
typedef struct scored {
    double nll;
    int32_t position, argmax;
} scored;

/* Every cp rank's scored positions (n here, at pos, scored into nll and argmax) into the window's
 * nll and argmax (indexed by position - score_from). */
static em_status gather_scores(const em_forward_group *cp, const int32_t *pos, int n,
                               const double *lnll, const int32_t *largmax, int most, int score_from,
                               double *nll, int32_t *argmax) {
    size_t block = (size_t)(most ? most : 1);
    scored *mine = em_xcalloc(block, sizeof *mine);
    scored *all = em_xcalloc(block * (size_t)cp->size, sizeof *all);
    for (int i = 0; i < (int)block; i++) mine[i].position = -1;
    for (int i = 0; i < n; i++) mine[i] = (scored){lnll[i], pos[i], largmax[i]};
    em_status err = em_forward_allgather(cp, mine, all, block * sizeof *mine);
    for (size_t i = 0; i < block * (size_t)cp->size && !err; i++) {
        if (all[i].position < 0) continue;
        nll[all[i].position - score_from] = all[i].nll;
        argmax[all[i].position - score_from] = all[i].argmax;
    }
    free(mine);
    free(all);
    return err;
}

/* The end of a sub-block (the attention's (ffn false) or the MLP's): its product is in x already
 * (tp = 1 without post-norms) or in y as this rank's part; gathers and adds it, through the
 * post-norm when the model has them. */
static em_status residual(const em_llama_kernels *k, void *b, int layer, bool ffn, bool post_norms,
                          const em_forward_group *tp, float *all, int T, int dim) {
    if (!post_norms) return tp->size > 1 ? sum_partials(k, b, tp, all, T, dim) : NULL;
    em_status err = NULL;
    if (tp->size > 1)
        err = em_forward_allgather(tp, k->partial(b), all, (size_t)T * (size_t)dim * sizeof(float));
    if (!err) k->add_normed(b, layer, ffn, tp->size > 1 ? all : NULL, tp->size, T);
    return err ? em_error_prefix(err, "tensor-parallel sum") : NULL;
}

/* The blocks over the n rows begin made: attention within each window of the batch (cp = 1) or
 * around the cp ring (this rank's positions pos, most the largest block a cp rank holds); the
 * row-parallel products summed over tp. */
static em_status layers(const em_llama_kernels *k, void *b, int n_layers, int dim, bool post_norms,
                        const em_forward_group *tp, const em_forward_group *cp, int n,
                        const int32_t *pos, int most) {
    bool split = tp->size > 1, apart = split || post_norms; /* products to y, not x */
    float *all = NULL;                                      /* (tp, n, D) gathered partial sums */
    if (split) {
        all = malloc((size_t)tp->size * (size_t)n * (size_t)dim * sizeof *all);
        if (!all)
            return em_error_new(EM_EXIT_RUNTIME, "out of memory for the tensor-parallel sums");
    }
    em_status err = NULL;
    for (int l = 0; l < n_layers && !err; l++) {
        k->norm(b, l, false, n);
        k->qkv(b, l, n);
        if (cp->size > 1)
            err = ring_attention(k, b, l, cp, n, pos, most);
        else
            k->attention(b, l, n);
        if (err) break;
        k->attn_out(b, l, n, apart);
        err = residual(k, b, l, false, post_norms, tp, all, n, dim);
        if (err) break;
        k->norm(b, l, true, n);
        k->mlp(b, l, n, apart);
        err = residual(k, b, l, true, post_norms, tp, all, n, dim);
        em_heartbeat(); /* a long batch still shows this rank alive */
    }
    free(all);
    return err;
}

/* One window across the cp group (cp > 1): this rank's positions through the layers, ring
 * attention, and the scored positions gathered from every cp rank. */
static em_status compose_cp(const em_llama_kernels *k, void *b, int n_layers, int dim,
                            bool post_norms, int64_t n_vocab, const em_forward_groups *groups,
                            const em_forward_group *cp, int threads, const em_batch_window *w) {
    const em_forward_group *tp = &groups->tp;
    int T = w->T, score_from = w->score_from;
    /* this rank's positions, their inputs and targets */
    int32_t *pos = em_xmalloc((size_t)T * sizeof *pos);
    int n = em_cp_positions(T, cp->size, cp->rank, pos);
    int most = most_positions(T, cp->size, score_from, false);
    int32_t *own_in = em_xmalloc((size_t)n * sizeof *own_in);
    int32_t *own_tg = em_xmalloc((size_t)n * sizeof *own_tg);
    for (int i = 0; i < n; i++)
        own_in[i] = w->input[pos[i]], own_tg[i] = w->target ? w->target[pos[i]] : 0;
    int32_t rows[2] = {0, n};
    em_segments own = {1, rows};
    em_status err = k->begin(b, own_in, pos, &own);
    if (!err) err = layers(k, b, n_layers, dim, post_norms, tp, cp, n, pos, most);
    if (!err) {
        /* the scored positions are a suffix of this rank's (its second block follows its first) */
        int from = 0;
        while (from < n && pos[from] < score_from) from++;
        int scored_here = n - from;
        double *lnll = em_xcalloc((size_t)(scored_here ? scored_here : 1), sizeof *lnll);
        int32_t *larg = em_xmalloc((size_t)(scored_here ? scored_here : 1) * sizeof *larg);
        if (scored_here)
            err = head(k, b, n_vocab, tp, threads, w->target ? own_tg + from : NULL, from,
                       scored_here, w->target ? lnll : NULL, larg);
        if (!err)
            err = gather_scores(cp, pos + from, scored_here, lnll, larg,
                                most_positions(T, cp->size, score_from, true), score_from, w->nll,
                                w->argmax);
        free(lnll);
        free(larg);
    }
    free(pos);
    free(own_in);
    free(own_tg);
    return err;
}

static em_status check_ids(const int32_t *ids, int T, int64_t n_vocab, const char *what) {
    for (int t = 0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= n_vocab)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s token id %d at position %d is outside the vocabulary (%lld)",
                                what, ids[t], t, (long long)n_vocab);
    return NULL;
}

/* Windows of T >= 1 positions scored from score_from < T, their ids in the vocabulary, at most
 * INT32_MAX rows together. */
static em_status check_windows(int64_t n_vocab, const em_batch_window *windows, int count) {
    int64_t rows = 0;
    for (int w = 0; w < count; w++) {
        const em_batch_window *win = &windows[w];
        em_status err = NULL;
        if (win->T < 1 || win->score_from < 0 || win->score_from >= win->T)
            err = em_error_new(EM_EXIT_BAD_INPUT, "window of %d positions scored from %d is empty",
                               win->T, win->score_from);
        if (!err) err = check_ids(win->input, win->T, n_vocab, "input");
        if (!err && win->target)
            err = check_ids(win->target + win->score_from, win->T - win->score_from, n_vocab,
                            "target");
        if (err) return count > 1 ? em_error_prefix(err, "window %d of the batch", w) : err;
        rows += win->T;
    }
    if (rows > INT32_MAX)
        return em_error_new(EM_EXIT_BAD_INPUT, "a batch of %lld positions is too large",
                            (long long)rows);
    return NULL;
}

em_status em_llama_compose(const em_llama_kernels *k, void *b, int n_layers, int dim,
                           bool post_norms, int64_t n_vocab, const em_forward_groups *groups,
                           int threads, const em_batch_window *windows, int count) {
    const em_forward_group *tp = &groups->tp;
    em_status err = check_windows(n_vocab, windows, count);
    if (err || count < 1) return err;
    if (groups->cp.size > 1 && count > 1)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "a forward with cp = %d scores one window per batch (this batch has "
                            "%d)",
                            groups->cp.size, count);
    /* A window too short for 2 cp blocks (the tail of a document) is computed whole by every
     * rank of the cp group: the same numbers on each, for any dp. */
    if (groups->cp.size > 1 && windows[0].T >= 2 * groups->cp.size)
        return compose_cp(k, b, n_layers, dim, post_norms, n_vocab, groups, &groups->cp, threads,
                          windows);
    /* the windows' rows concatenated: inputs (T), positions restarting at 0 per window (NULL for
     * one window: 0 .. T-1) */
    int32_t *start = em_xmalloc((size_t)(count + 1) * sizeof *start);
    start[0] = 0;
    for (int w = 0; w < count; w++) start[w + 1] = start[w] + windows[w].T;
    int T = start[count];
    int32_t *batch_in = NULL, *pos = NULL;
    const int32_t *in = windows[0].input;
    if (count > 1) {
        in = batch_in = em_xmalloc((size_t)T * sizeof *batch_in);
        pos = em_xmalloc((size_t)T * sizeof *pos);
        for (int w = 0; w < count; w++) {
            memcpy(batch_in + start[w], windows[w].input, (size_t)windows[w].T * sizeof *in);
            for (int i = 0; i < windows[w].T; i++) pos[start[w] + i] = i;
        }
    }
    em_segments segments = {count, start};
    err = k->begin(b, in, pos, &segments);
    const em_forward_group alone = {.rank = 0, .size = 1}; /* attention within each window */
    if (!err) err = layers(k, b, n_layers, dim, post_norms, tp, &alone, T, NULL, 0);
    /* the windows' heads over their scored rows; nll NULL: the layers only, the caller runs its
     * own head (a compared pair, tp = cp = 1) */
    for (int w = 0; w < count && !err && windows[w].nll; w = heads_end(windows, count, w))
        err = heads(k, b, n_vocab, tp, threads, windows, start, w, heads_end(windows, count, w));
    free(start);
    free(batch_in);
    free(pos);
    return err;
}
