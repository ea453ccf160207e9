/* Tiled y = x W^T over OpenMP threads with the packed GEMM of gemm.h (see matmul.h). */
#include "stages/kernels/cpu/matmul.h"

#include <omp.h>

#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/gemm.h"

/* A tile's result: ct (padded rows, padded tokens) at the start of a thread's scratch. */
static size_t tile_result_floats(int T, int rows) {
    return (size_t)em_gemm_padded_rows(rows) * em_gemm_result_stride(T);
}

size_t em_matmul_tile_floats(int T, int64_t n_in, int rows) {
    return tile_result_floats(T, rows) + (size_t)rows * (size_t)(n_in + EM_GEMM_ROW_PAD);
}

void em_matmul_pack(const float *x, int T, int n_in, em_scratch *s) {
    int panels = em_gemm_padded_tokens(T) / EM_GEMM_PANEL;
    bool parallel = (int64_t)T * n_in >= EM_PARALLEL_MIN_WORK / 16;
#pragma omp parallel for num_threads(s->threads) if (parallel)
    for (int p = 0; p < panels; p++) em_gemm_pack_panel(x, (size_t)n_in, T, n_in, p, s->packed);
}

float *em_matmul_tile_rows(const em_tensor *w, int T, int64_t row0, int rows, const em_scratch *s,
                           float *buf) {
    int n_in = (int)w->shape[0];
    float *ct = buf; /* (padded rows, result stride) */
    if (w->type == EM_TENSOR_F32 && ((size_t)n_in * sizeof(float)) % 4096 != 0) {
        /* in place in the mapped file: rows 4 KiB apart would share cache sets, others do not */
        const float *rows_in_file = (const float *)w->data + row0 * n_in;
        em_gemm_tile(s->kernel, s->packed, T, n_in, rows_in_file, (size_t)n_in, rows, ct);
        return ct;
    }
    size_t ldw = (size_t)n_in + EM_GEMM_ROW_PAD;
    float *wt = buf + tile_result_floats(T, rows); /* (rows, n_in), row stride ldw */
    em_rows_to_float(w, row0, rows, wt, (int64_t)ldw);
    em_gemm_tile(s->kernel, s->packed, T, n_in, wt, ldw, rows, ct);
    return ct;
}

/* The tiles of count weights, numbered across all of them; y (T, n_out) per weight. */
static void matmul_tiles(int T, int count, const em_tensor *const *w, float *const *y,
                         bool accumulate, em_scratch *s) {
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
        int rows = (int)(n_out - row0 < EM_MATMUL_TILE_ROWS ? n_out - row0 : EM_MATMUL_TILE_ROWS);
        const float *ct = em_matmul_tile_rows(w[i], T, row0, rows, s, s->buf[omp_get_thread_num()]);
        em_transpose(ct, em_gemm_result_stride(T), rows, T, y[i] + row0, (size_t)n_out, accumulate);
    }
}

void em_matmul(const float *x, int T, const em_tensor *w, float *y, bool accumulate,
               em_scratch *s) {
    em_matmul_pack(x, T, (int)w->shape[0], s);
    matmul_tiles(T, 1, &w, &y, accumulate, s);
}

void em_matmul_many(const float *x, int T, int count, const em_tensor *const *w, float *const *y,
                    em_scratch *s) {
    em_matmul_pack(x, T, (int)w[0]->shape[0], s);
    matmul_tiles(T, count, w, y, false, s);
}
