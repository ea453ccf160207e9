/* Both output heads of a compared pair and their tiled KL divergence (see pair_head.h). */
#include "stages/kernels/cpu/pair_head.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>

#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/matmul.h"
#include "stages/kernels/cpu/output_head.h"
#include "stages/kernels/cpu/softcap.h"
#include "stages/kernels/vocab_head.h"

/* The partials of one tile of n rows from the logits lr, lc (n, ldl) for positions 0..T-1. */
static void tile_partials(const float *lr, const float *lc, size_t ldl, int T, int n,
                          em_pair_tile *out) {
    for (int t = 0; t < T; t++) {
        float mr = lr[t], mc = lc[t];
        for (int j = 1; j < n; j++) {
            mr = lr[(size_t)j * ldl + t] > mr ? lr[(size_t)j * ldl + t] : mr;
            mc = lc[(size_t)j * ldl + t] > mc ? lc[(size_t)j * ldl + t] : mc;
        }
        double sr = 0.0, sc = 0.0, a = 0.0;
        for (int j = 0; j < n; j++) {
            double r = lr[(size_t)j * ldl + t], c = lc[(size_t)j * ldl + t];
            double e = exp(r - (double)mr);
            sr += e;
            a += e * (r - c);
            sc += exp(c - (double)mc);
        }
        out[t] = (em_pair_tile){sr, sc, a, mr, mc};
    }
}

em_status em_pair_head(const em_pair_side *ref, const em_pair_side *cand, const int32_t *target,
                       int T, double *kl) {
    const em_tensor *wr = ref->w, *wc = cand->w;
    int Dr = (int)wr->shape[0], Dc = (int)wc->shape[0];
    int64_t n_vocab = wr->shape[1];
    if (wc->shape[1] != n_vocab)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "the reference has %lld vocabulary rows, the candidate %lld",
                            (long long)n_vocab, (long long)wc->shape[1]);
    int64_t tiles = em_head_tiles(n_vocab);
    size_t cells = (size_t)tiles * (size_t)T;
    em_pair_tile *part = malloc(cells * sizeof *part);          /* (tiles, T) */
    em_head_tile *head = malloc(2 * cells * sizeof *head);      /* ref's, cand's (tiles, T) */
    float *target_logit = calloc(2 * (size_t)T, sizeof(float)); /* ref's, cand's (T) */
    if (!part || !head || !target_logit) {
        free(part);
        free(head);
        free(target_logit);
        return em_error_new(EM_EXIT_RUNTIME, "out of memory for the paired head's tiles");
    }
    em_scratch *sr = ref->scratch, *sc = cand->scratch;
    em_matmul_pack(ref->x, T, Dr, sr->packed, sr);
    em_matmul_pack(cand->x, T, Dc, sc->packed, sc);
    em_matmul_quantize(sr->packed, T, Dr, 1, &wr, sr);
    em_matmul_quantize(sc->packed, T, Dc, 1, &wc, sc);
    size_t ldl = em_gemm_result_stride(T);
    size_t work_r = em_matmul_tile_floats(T, Dr, EM_HEAD_TILE_ROWS);
    size_t work_c = em_matmul_tile_floats(T, Dc, EM_HEAD_TILE_ROWS);
    bool parallel = tiles > 1 && (int64_t)T * (Dr + Dc) * n_vocab >= EM_PARALLEL_MIN_WORK;
    em_schedule_tiles(T);
#pragma omp parallel for schedule(runtime) num_threads(sr->threads) if (parallel)
    for (int64_t v = 0; v < tiles; v++) {
        int64_t first = v * EM_HEAD_TILE_ROWS;
        int n = (int)(n_vocab - first < EM_HEAD_TILE_ROWS ? n_vocab - first : EM_HEAD_TILE_ROWS);
        int thread = omp_get_thread_num();
        /* logits (n, ldl) of each head, in each forward's buffer of this thread */
        float *lr = em_matmul_tile_rows(wr, sr->packed, T, first, n, sr, sr->buf[thread]);
        float *lc = em_matmul_tile_rows(wc, sc->packed, T, first, n, sc, sc->buf[thread]);
        if (ref->softcap > 0) em_softcap(lr, (size_t)n * ldl, ref->softcap);
        if (cand->softcap > 0) em_softcap(lc, (size_t)n * ldl, cand->softcap);
        tile_partials(lr, lc, ldl, T, n, part + v * T);
        /* then each head's own partials, which overwrite its logits */
        em_output_head_tile(lr, ldl, T, n, first, target, sr->buf[thread] + work_r, target_logit,
                            head + v * T);
        em_output_head_tile(lc, ldl, T, n, first, target, sc->buf[thread] + work_c,
                            target_logit + T, head + cells + v * T);
    }
    em_head_merge(head, tiles, T, target_logit, ref->nll, ref->argmax, sr->threads);
    em_head_merge(head + cells, tiles, T, target_logit + T, cand->nll, cand->argmax, sc->threads);
    em_pair_merge(part, tiles, T, kl);
    free(part);
    free(head);
    free(target_logit);
    return NULL;
}
