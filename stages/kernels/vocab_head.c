/* Merging the output head's vocabulary tiles (see vocab_head.h). */
#include "stages/kernels/vocab_head.h"

#include <math.h>

#include "stages/kernels/cpu/scratch.h"

int64_t em_head_tiles(int64_t n_vocab) {
    return (n_vocab + EM_HEAD_TILE_ROWS - 1) / EM_HEAD_TILE_ROWS;
}

void em_vocab_shard(int64_t n_vocab, int tp, int r, int64_t *row0, int64_t *rows) {
    int64_t tiles = em_head_tiles(n_vocab);
    int64_t t0 = tiles * r / tp, t1 = tiles * (r + 1) / tp;
    int64_t end = t1 * EM_HEAD_TILE_ROWS < n_vocab ? t1 * EM_HEAD_TILE_ROWS : n_vocab;
    *row0 = t0 * EM_HEAD_TILE_ROWS;
    *rows = end > *row0 ? end - *row0 : 0;
}

void em_head_merge(const em_head_tile *part, int64_t tiles, int T, const float *target_logit,
                   double *nll, int32_t *argmax, int threads) {
#pragma omp parallel for num_threads(threads) if ((int64_t)T * tiles >= EM_PARALLEL_MIN_WORK)
    for (int t = 0; t < T; t++) {
        float max = part[t].max;
        int32_t best = part[t].argmax;
        for (int64_t v = 1; v < tiles; v++) {
            if (part[v * T + t].max > max) {
                max = part[v * T + t].max;
                best = part[v * T + t].argmax;
            }
        }
        argmax[t] = best;
        if (!nll) continue;
        double sum = 0.0;
        for (int64_t v = 0; v < tiles; v++) {
            sum += part[v * T + t].sum_exp * exp((double)part[v * T + t].max - (double)max);
        }
        nll[t] = (double)max + log(sum) - (double)target_logit[t];
    }
}

void em_pair_merge(const em_pair_tile *part, int64_t tiles, int T, double *kl) {
    for (int t = 0; t < T; t++) {
        float mr = part[t].max_ref, mc = part[t].max_cand;
        for (int64_t v = 1; v < tiles; v++) {
            mr = part[v * T + t].max_ref > mr ? part[v * T + t].max_ref : mr;
            mc = part[v * T + t].max_cand > mc ? part[v * T + t].max_cand : mc;
        }
        double s_ref = 0.0, s_cand = 0.0, a = 0.0;
        for (int64_t v = 0; v < tiles; v++) {
            const em_pair_tile *p = &part[v * T + t];
            double scale = exp((double)p->max_ref - (double)mr);
            s_ref += p->sum_ref * scale;
            a += p->a * scale;
            s_cand += p->sum_cand * exp((double)p->max_cand - (double)mc);
        }
        kl[t] = a / s_ref - ((double)mr + log(s_ref)) + ((double)mc + log(s_cand));
    }
}
