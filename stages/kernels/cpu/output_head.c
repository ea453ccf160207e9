/* Vocabulary-tiled log-softmax of the target and argmax (see output_head.h). */
#include "stages/kernels/cpu/output_head.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>

#include "stages/kernels/cpu/fast_exp.h"
#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/matmul.h"

/* Per-position working arrays after the tile in a thread's scratch: max and argmax (floats' room
 * each) and the double sum (two floats' room). */
static size_t per_position_floats(int T) {
    return 4 * em_gemm_result_stride(T);
}

size_t em_output_head_scratch_floats(int T, int D) {
    return em_matmul_tile_floats(T, D, EM_HEAD_TILE_ROWS) + per_position_floats(T);
}

/* What one vocabulary tile says about one position. */
typedef struct tile_partial {
    double sum_exp; /* sum over the tile of exp(logit - max) */
    float max;      /* the tile's largest logit */
    int32_t argmax; /* its first index (global id) */
} tile_partial;

size_t em_output_head_partial_bytes(int T, int64_t n_vocab) {
    size_t tiles = (size_t)((n_vocab + EM_HEAD_TILE_ROWS - 1) / EM_HEAD_TILE_ROWS);
    return tiles * (size_t)T * sizeof(tile_partial) + (size_t)T * sizeof(float);
}

/* The partials of one tile for positions 0..T-1 from its logits lt (rows, ldl), which are
 * overwritten; target_logit[t] is set where the target is in the tile. */
static void tile_partials(float *lt, size_t ldl, int T, int rows, int64_t row0,
                          const int32_t *target, float *max, int32_t *best, double *sum,
                          float *target_logit, tile_partial *out) {
    for (int t = 0; t < T; t++) {
        max[t] = lt[t];
        best[t] = 0;
        sum[t] = 0.0;
        if (target[t] >= row0 && target[t] < row0 + rows) {
            target_logit[t] = lt[(size_t)(target[t] - row0) * ldl + t];
        }
    }
    for (int j = 1; j < rows; j++) {
        const float *l = lt + (size_t)j * ldl;
        for (int t = 0; t < T; t++) {
            best[t] = l[t] > max[t] ? j : best[t];
            max[t] = l[t] > max[t] ? l[t] : max[t];
        }
    }
    for (int j = 0; j < rows; j++) {
        float *l = lt + (size_t)j * ldl;
        for (int t = 0; t < T; t++) l[t] -= max[t];
        em_exp_inplace(l, (size_t)T);
        for (int t = 0; t < T; t++) sum[t] += l[t];
    }
    for (int t = 0; t < T; t++) {
        out[t] =
            (tile_partial){.sum_exp = sum[t], .max = max[t], .argmax = (int32_t)row0 + best[t]};
    }
}

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
    em_matmul_pack(x, T, D, s->packed, s);
    size_t ldl = em_gemm_result_stride(T);
    size_t tile_floats = em_matmul_tile_floats(T, D, EM_HEAD_TILE_ROWS);
    bool parallel = tiles > 1 && (int64_t)T * D * n_vocab >= EM_PARALLEL_MIN_WORK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads) if (parallel)
    for (int64_t v = 0; v < tiles; v++) {
        int64_t row0 = v * EM_HEAD_TILE_ROWS;
        int rows = (int)(n_vocab - row0 < EM_HEAD_TILE_ROWS ? n_vocab - row0 : EM_HEAD_TILE_ROWS);
        float *buf = s->buf[omp_get_thread_num()];
        /* logits (rows, ldl) */
        float *lt = em_matmul_tile_rows(w, s->packed, T, row0, rows, s, buf);
        float *max = buf + tile_floats;          /* (T) */
        int32_t *best = (int32_t *)(max + ldl);  /* (T) */
        double *sum = (double *)(max + 2 * ldl); /* (T) */
        tile_partials(lt, ldl, T, rows, row0, target, max, best, sum, target_logit, part + v * T);
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
