/* Vocabulary-tiled log-softmax of the target and argmax (see output_head.h). */
#include "stages/kernels/cpu/output_head.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>

#include "stages/kernels/cpu/fast_exp.h"
#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/matmul.h"
#include "stages/kernels/cpu/softcap.h"

/* Per-position working arrays after the tile in a thread's scratch: max and argmax (floats' room
 * each) and the double sum (two floats' room). */
static size_t per_position_floats(int T) {
    return 4 * em_gemm_result_stride(T);
}

size_t em_output_head_scratch_floats(int T, int D) {
    return em_matmul_tile_floats(T, D, EM_HEAD_TILE_ROWS) + per_position_floats(T);
}

size_t em_output_head_partial_bytes(int T, int64_t n_vocab) {
    size_t tiles = (size_t)((n_vocab + EM_HEAD_TILE_ROWS - 1) / EM_HEAD_TILE_ROWS);
    return tiles * (size_t)T * sizeof(em_head_tile) + (size_t)T * sizeof(float);
}

void em_output_head_tile(float *lt, size_t ldl, int T, int rows, int64_t row0,
                         const int32_t *target, float *work, float *target_logit,
                         em_head_tile *out) {
    float *max = work;                       /* (T) */
    int32_t *best = (int32_t *)(max + ldl);  /* (T) */
    double *sum = (double *)(max + 2 * ldl); /* (T) */
    for (int t = 0; t < T; t++) {
        max[t] = lt[t];
        best[t] = 0;
        sum[t] = 0.0;
        if (target && target[t] >= row0 && target[t] < row0 + rows) {
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
    if (!target) { /* the argmax alone */
        for (int t = 0; t < T; t++)
            out[t] =
                (em_head_tile){.sum_exp = 0.0, .max = max[t], .argmax = (int32_t)row0 + best[t]};
        return;
    }
    /* The tile's rows close up to (rows, T), shifted by their maxima, and go through exp in one
     * call: at T = 1 (a decoding step) one call per row would cost more than the exp itself, and
     * exp is elementwise, so every value is the same bits either way. */
    for (int j = 0; j < rows; j++) {
        const float *from = lt + (size_t)j * ldl;
        float *to = lt + (size_t)j * T; /* at or before from: rows move forward in order */
        for (int t = 0; t < T; t++) to[t] = from[t] - max[t];
    }
    em_exp_inplace(lt, (size_t)rows * T);
    for (int j = 0; j < rows; j++)
        for (int t = 0; t < T; t++) sum[t] += lt[(size_t)j * T + t];
    for (int t = 0; t < T; t++) {
        out[t] =
            (em_head_tile){.sum_exp = sum[t], .max = max[t], .argmax = (int32_t)row0 + best[t]};
    }
}

void em_output_head_tiles(const float *x, int T, const em_tensor *w, int64_t row0, int64_t rows,
                          float softcap, const int32_t *target, em_head_tile *part,
                          float *target_logit, em_scratch *s) {
    int D = (int)w->shape[0];
    int64_t tiles = em_head_tiles(rows);
    em_matmul_pack(x, T, D, s->packed, s);
    em_matmul_quantize(s->packed, T, D, 1, &w, s);
    size_t ldl = em_gemm_result_stride(T);
    size_t tile_floats = em_matmul_tile_floats(T, D, EM_HEAD_TILE_ROWS);
    bool parallel = tiles > 1 && em_product_work(T, (int64_t)D * rows) >= EM_PARALLEL_MIN_WORK;
    em_schedule_tiles(T);
#pragma omp parallel for schedule(runtime) num_threads(s->threads) if (parallel)
    for (int64_t v = 0; v < tiles; v++) {
        int64_t first = row0 + v * EM_HEAD_TILE_ROWS, end = row0 + rows;
        int n = (int)(end - first < EM_HEAD_TILE_ROWS ? end - first : EM_HEAD_TILE_ROWS);
        float *buf = s->buf[omp_get_thread_num()];
        /* logits (n, ldl) */
        float *lt = em_matmul_tile_rows(w, s->packed, T, first, n, s, buf);
        if (softcap > 0) em_softcap(lt, (size_t)n * ldl, softcap);
        em_output_head_tile(lt, ldl, T, n, first, target, buf + tile_floats, target_logit,
                            part + v * T);
    }
}

void em_output_head_logits(const float *x, int T, const em_tensor *w, int64_t row0, int64_t rows,
                           float softcap, float *logits, em_scratch *s) {
    int D = (int)w->shape[0];
    int64_t tiles = em_head_tiles(rows);
    em_matmul_pack(x, T, D, s->packed, s);
    em_matmul_quantize(s->packed, T, D, 1, &w, s);
    size_t ldl = em_gemm_result_stride(T);
    bool parallel = tiles > 1 && em_product_work(T, (int64_t)D * rows) >= EM_PARALLEL_MIN_WORK;
    em_schedule_tiles(T);
#pragma omp parallel for schedule(runtime) num_threads(s->threads) if (parallel)
    for (int64_t v = 0; v < tiles; v++) {
        int64_t first = row0 + v * EM_HEAD_TILE_ROWS, end = row0 + rows;
        int n = (int)(end - first < EM_HEAD_TILE_ROWS ? end - first : EM_HEAD_TILE_ROWS);
        float *lt = em_matmul_tile_rows(w, s->packed, T, first, n, s, s->buf[omp_get_thread_num()]);
        if (softcap > 0) em_softcap(lt, (size_t)n * ldl, softcap);
        for (int j = 0; j < n; j++)
            for (int t = 0; t < T; t++)
                logits[(size_t)t * (size_t)rows + (size_t)(first - row0) + (size_t)j] =
                    lt[(size_t)j * ldl + (size_t)t];
    }
}
