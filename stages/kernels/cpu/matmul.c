/* Tiled y = x W^T over OpenMP threads with single-threaded OpenBLAS sgemm (see matmul.h). */
#include "stages/kernels/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>
#include <stdbool.h>

#include "stages/kernels/cpu/dequantize.h"

size_t em_matmul_scratch_floats(int64_t n_in) {
    return (size_t)EM_MATMUL_TILE_ROWS * (size_t)n_in;
}

void em_matmul_rows(const float *x, int T, const em_tensor *w, int64_t row0, int64_t rows, float *y,
                    int ldy, float beta, float *tile) {
    int n_in = (int)w->shape[0];
    const float *wt; /* (rows, n_in) */
    if (w->type == EM_TENSOR_F32) {
        wt = (const float *)w->data + row0 * n_in;
    } else {
        em_rows_to_float(w, row0, rows, tile);
        wt = tile;
    }
    /* y (T, rows) = x (T, n_in) . wt^T (+ y) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, (int)rows, n_in, 1.0f, x, n_in, wt,
                n_in, beta, y, ldy);
}

/* The tiles of count weights, numbered across all of them; y (T, n_out) per weight. */
static void matmul_tiles(const float *x, int T, int count, const em_tensor *const *w,
                         float *const *y, float beta, em_scratch *s) {
    int64_t tiles = 0, work = 0;
    for (int i = 0; i < count; i++) {
        tiles += (w[i]->shape[1] + EM_MATMUL_TILE_ROWS - 1) / EM_MATMUL_TILE_ROWS;
        work += (int64_t)T * w[i]->shape[0] * w[i]->shape[1];
    }
    bool parallel = tiles > 1 && work >= EM_PARALLEL_MIN_WORK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads) if (parallel)
    for (int64_t tile = 0; tile < tiles; tile++) {
        /* which weight, and which of its tiles */
        int i = 0;
        int64_t first = tile;
        for (;;) {
            int64_t n = (w[i]->shape[1] + EM_MATMUL_TILE_ROWS - 1) / EM_MATMUL_TILE_ROWS;
            if (first < n) break;
            first -= n;
            i++;
        }
        int64_t n_out = w[i]->shape[1];
        int64_t row0 = first * EM_MATMUL_TILE_ROWS;
        int64_t rows = n_out - row0 < EM_MATMUL_TILE_ROWS ? n_out - row0 : EM_MATMUL_TILE_ROWS;
        em_matmul_rows(x, T, w[i], row0, rows, y[i] + row0, (int)n_out, beta,
                       s->buf[omp_get_thread_num()]);
    }
}

void em_matmul(const float *x, int T, const em_tensor *w, float *y, bool accumulate,
               em_scratch *s) {
    matmul_tiles(x, T, 1, &w, &y, accumulate ? 1.0f : 0.0f, s);
}

void em_matmul_many(const float *x, int T, int count, const em_tensor *const *w, float *const *y,
                    em_scratch *s) {
    matmul_tiles(x, T, count, w, y, 0.0f, s);
}
