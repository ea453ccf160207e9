/* Vocabulary-tiled log-softmax of the target and argmax (see output_head.h). */
#include "stages/kernels/cpu/output_head.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>

#include "stages/kernels/cpu/fast_exp.h"
#include "stages/kernels/cpu/matmul.h"

size_t em_output_head_scratch_floats(int T, int D) {
    return (size_t)EM_HEAD_TILE_ROWS * ((size_t)D + (size_t)T);
}

/* What one vocabulary tile says about one position. */
typedef struct tile_partial {
    double sum_exp; /* sum over the tile of exp(logit - max) */
    float max;      /* the tile's largest logit */
    int32_t argmax; /* its first index (global id) */
} tile_partial;

em_status em_output_head(const float *x, int T, const em_tensor *w, const int32_t *target,
                         double *nll, int32_t *argmax, em_scratch *s) {
    int D = (int)w->shape[0];
    int64_t n_vocab = w->shape[1];
    int64_t tiles = (n_vocab + EM_HEAD_TILE_ROWS - 1) / EM_HEAD_TILE_ROWS;
    tile_partial *part = malloc((size_t)tiles * (size_t)T * sizeof *part); /* (tiles, T) */
    float *target_logit = malloc((size_t)T * sizeof *target_logit);        /* (T) */
    if (!part || !target_logit) {
        free(part);
        free(target_logit);
        return em_error_new(EM_EXIT_RUNTIME, "out of memory for the output head partials");
    }
    bool parallel = tiles > 1 && (int64_t)T * D * n_vocab >= EM_PARALLEL_MIN_WORK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads) if (parallel)
    for (int64_t v = 0; v < tiles; v++) {
        int64_t row0 = v * EM_HEAD_TILE_ROWS;
        int rows = (int)(n_vocab - row0 < EM_HEAD_TILE_ROWS ? n_vocab - row0 : EM_HEAD_TILE_ROWS);
        float *tile = s->buf[omp_get_thread_num()];           /* (rows, D) */
        float *logits = tile + (size_t)EM_HEAD_TILE_ROWS * D; /* (T, rows) */
        em_matmul_rows(x, T, w, row0, rows, logits, rows, 0.0f, tile);
        for (int t = 0; t < T; t++) {
            float *l = logits + (size_t)t * rows;
            if (target[t] >= row0 && target[t] < row0 + rows) target_logit[t] = l[target[t] - row0];
            float max = l[0];
            int best = 0;
            for (int j = 1; j < rows; j++) {
                if (l[j] > max) {
                    max = l[j];
                    best = j;
                }
            }
            for (int j = 0; j < rows; j++) l[j] -= max;
            em_exp_inplace(l, (size_t)rows);
            /* four running sums in double, combined in a fixed order */
            double sum4[4] = {0.0, 0.0, 0.0, 0.0};
            int j = 0;
            for (; j + 4 <= rows; j += 4) {
                for (int k = 0; k < 4; k++) sum4[k] += l[j + k];
            }
            for (; j < rows; j++) sum4[0] += l[j];
            double sum = (sum4[0] + sum4[1]) + (sum4[2] + sum4[3]);
            tile_partial *p = &part[v * T + t];
            p->sum_exp = sum;
            p->max = max;
            p->argmax = (int32_t)(row0 + best);
        }
    }
#pragma omp parallel for num_threads(s->threads) if ((int64_t)T * tiles >= EM_PARALLEL_MIN_WORK)
    for (int t = 0; t < T; t++) {
        float max = part[t].max;
        int32_t best = part[t].argmax;
        for (int64_t v = 1; v < tiles; v++) {
            if (part[v * T + t].max > max) {
                max = part[v * T + t].max;
                best = part[v * T + t].argmax;
            }
        }
        double sum = 0.0;
        for (int64_t v = 0; v < tiles; v++) {
            sum += part[v * T + t].sum_exp * exp((double)part[v * T + t].max - (double)max);
        }
        nll[t] = (double)max + log(sum) - (double)target_logit[t];
        argmax[t] = best;
    }
    free(part);
    free(target_logit);
    return NULL;
}
