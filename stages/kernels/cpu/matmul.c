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
                    int ldy, float *tile) {
    int n_in = (int)w->shape[0];
    const float *wt; /* (rows, n_in) */
    if (w->type == EM_TENSOR_F32) {
        wt = (const float *)w->data + row0 * n_in;
    } else {
        em_rows_to_float(w, row0, rows, tile);
        wt = tile;
    }
    /* y (T, rows) = x (T, n_in) . wt^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, (int)rows, n_in, 1.0f, x, n_in, wt,
                n_in, 0.0f, y, ldy);
}

void em_matmul(const float *x, int T, const em_tensor *w, float *y, em_scratch *s) {
    int64_t n_out = w->shape[1];
    int64_t tiles = (n_out + EM_MATMUL_TILE_ROWS - 1) / EM_MATMUL_TILE_ROWS;
    bool parallel = tiles > 1 && (int64_t)T * w->shape[0] * n_out >= EM_PARALLEL_MIN_WORK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->threads) if (parallel)
    for (int64_t i = 0; i < tiles; i++) {
        int64_t row0 = i * EM_MATMUL_TILE_ROWS;
        int64_t rows = n_out - row0 < EM_MATMUL_TILE_ROWS ? n_out - row0 : EM_MATMUL_TILE_ROWS;
        em_matmul_rows(x, T, w, row0, rows, y + row0, (int)n_out, s->buf[omp_get_thread_num()]);
    }
}
