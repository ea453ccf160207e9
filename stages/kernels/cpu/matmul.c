/* Tiled y = x W^T over OpenMP threads with the packed GEMM of gemm.h (see matmul.h). */
#include "stages/kernels/cpu/matmul.h"

#include <omp.h>
#include <string.h>

#include "stages/kernels/cpu/dequantize.h"
#include "stages/kernels/cpu/gemm.h"
#include "stages/kernels/cpu/one_token_quantized.h"
#include "stages/kernels/cpu/swiglu.h"

/* A tile's result: ct (padded rows, result stride) at the start of a thread's scratch. */
static size_t tile_result_floats(int T, int rows) {
    return (size_t)em_gemm_padded_rows(rows) * em_gemm_result_stride(T);
}

size_t em_matmul_tile_floats(int T, int64_t n_in, int rows) {
    return tile_result_floats(T, rows) + (size_t)rows * (size_t)(n_in + EM_GEMM_ROW_PAD);
}

size_t em_matmul_swiglu_floats(int T, int64_t n_in) {
    return tile_result_floats(T, EM_MATMUL_TILE_ROWS) +
           em_matmul_tile_floats(T, n_in, EM_MATMUL_TILE_ROWS);
}

void em_matmul_pack(const float *x, int T, int n_in, float *xp, const em_scratch *s) {
    int panels = em_gemm_panel_count(T);
    bool parallel = (int64_t)T * n_in >= EM_PARALLEL_MIN_ELEMENTS;
#pragma omp parallel for num_threads(s->threads) if (parallel)
    for (int p = 0; p < panels; p++) em_gemm_pack_panel(x, (size_t)n_in, T, n_in, p, xp);
}

void em_matmul_quantize(const float *xp, int T, int n_in, int count, const em_tensor *const *w,
                        em_scratch *s) {
    if (s->bf16) {
        int panels = em_gemm_padded_tokens(T) / EM_GEMM_PANEL;
        bool parallel = (int64_t)T * n_in >= EM_PARALLEL_MIN_ELEMENTS;
#pragma omp parallel for num_threads(s->threads) if (parallel)
        for (int p = 0; p < panels; p++) /* x's panel p holds the same tokens (T > 4) or none */
            s->bf16->pack_panel(em_gemm_packed(xp, T, n_in), n_in, p, em_gemm_panel_tokens(T, p),
                                s->bf16_x);
        return;
    }
    if (!s->ggml) return;
    /* the forms the weights' dot products read */
    unsigned reads = 0;
    for (int i = 0; i < count; i++) {
        int column = em_ggml_dot_type_of(w[i]->type);
        if (column >= 0) reads |= em_ggml_kernel_reads(s->ggml, column);
    }
    bool q8 = reads & EM_GGML_READS_Q8, q4k = reads & EM_GGML_READS_Q4K_LANES,
         q6k = em_ggml_reads_q6k_lanes(reads, T), f16 = reads & EM_GGML_READS_F16;
    if (f16) em_f16_round(em_gemm_packed(xp, T, n_in), T, n_in, s->threads, &s->q8);
    if (q8) em_q8_quantize(em_gemm_packed(xp, T, n_in), T, n_in, s->threads, &s->q8);
    if (q8 && s->ggml->prepare) s->ggml->prepare(&s->q8, s->threads);
    if (q4k || q6k) em_q8k_quantize(em_gemm_packed(xp, T, n_in), T, n_in, s->threads, &s->q8);
    if ((q4k || q6k) && s->ggml->prepare_k) s->ggml->prepare_k(&s->q8, q4k, q6k, s->threads);
}

float *em_matmul_tile_rows(const em_tensor *w, const float *xp, int T, int64_t row0, int rows,
                           const em_scratch *s, float *buf) {
    int n_in = (int)w->shape[0];
    float *ct = buf; /* (padded rows, result stride) */
    int dot = s->ggml ? em_ggml_dot_type_of(w->type) : -1;
    if (dot >= 0) {
        size_t row_bytes = em_tensor_type_row_bytes(w->type, n_in);
        s->ggml->tile[dot]((const uint8_t *)w->data + (size_t)row0 * row_bytes, row_bytes, rows,
                           &s->q8, ct, em_gemm_result_stride(T));
        return ct;
    }
    if (s->bf16) {
        size_t ldw = (size_t)n_in + EM_GEMM_ROW_PAD;
        float *wt = buf + tile_result_floats(T, rows); /* (rows, n_in), then rounded in place */
        if (em_bf16_reads_stored(w->type)) {           /* straight from the file's values */
            size_t row_bytes = em_tensor_type_row_bytes(w->type, n_in);
            s->bf16->round_stored_rows(w->type, (const uint8_t *)w->data + (size_t)row0 * row_bytes,
                                       row_bytes, rows, n_in, (uint32_t *)wt);
        } else {
            em_rows_to_float(w, row0, rows, wt, (int64_t)ldw);
            s->bf16->round_rows(wt, ldw, rows, n_in);
        }
        em_bf16_tile(s->bf16, s->bf16_x, T, n_in, (const uint32_t *)wt,
                     em_bf16_row_stride(s->bf16, n_in), rows, ct, em_gemm_result_stride(T));
        return ct;
    }
    em_one_token_quantized *direct = T == 1 && strcmp(s->kernel_name, "avx512") == 0
                                         ? em_one_token_quantized_for(w->type)
                                         : NULL;
    if (direct) { /* a decoding step: the same chains straight from the quantized or half rows */
        size_t row_bytes = em_tensor_type_row_bytes(w->type, n_in);
        em_gemm_panels x = em_gemm_packed(xp, T, n_in);
        direct(n_in, x.x, x.column_stride, (const uint8_t *)w->data + (size_t)row0 * row_bytes,
               row_bytes, rows, ct, em_gemm_result_stride(T));
        return ct;
    }
    if (w->type == EM_TENSOR_F32 && ((size_t)n_in * sizeof(float)) % 4096 != 0) {
        /* in place in the mapped file: rows 4 KiB apart would share cache sets, others do not */
        const float *rows_in_file = (const float *)w->data + row0 * n_in;
        em_gemm_tile(s->kernel, em_gemm_packed(xp, T, n_in), T, n_in, rows_in_file, (size_t)n_in,
                     rows, ct, em_gemm_result_stride(T));
        return ct;
    }
    size_t ldw = (size_t)n_in + EM_GEMM_ROW_PAD;
    float *wt = buf + tile_result_floats(T, rows); /* (rows, n_in), row stride ldw */
    em_rows_to_float(w, row0, rows, wt, (int64_t)ldw);
    em_gemm_tile(s->kernel, em_gemm_packed(xp, T, n_in), T, n_in, wt, ldw, rows, ct,
                 em_gemm_result_stride(T));
    return ct;
}

/* Rows per tile of a weight with n_out rows: EM_MATMUL_TILE_ROWS, or fewer (whole kernel calls)
 * when that would leave fewer than four tiles per thread, so that many threads finish together.
 * Results do not depend on it (matmul.h). */
static int tile_height(const em_tensor *w, int threads) {
    int64_t height = w->shape[1] / (4 * (int64_t)threads) / EM_GEMM_ROWS * EM_GEMM_ROWS;
    if (height < EM_GEMM_ROWS) return EM_GEMM_ROWS;
    return height < EM_MATMUL_TILE_ROWS ? (int)height : EM_MATMUL_TILE_ROWS;
}

static int64_t tile_count(const em_tensor *w, int height) {
    return (w->shape[1] + height - 1) / height;
}

/* The rows of the tile starting at row0 (the last one may be short). */
static int tile_rows(const em_tensor *w, int64_t row0, int height) {
    int64_t left = w->shape[1] - row0;
    return (int)(left < height ? left : height);
}

void em_matmul_packed(const float *xp, int T, int count, const em_tensor *const *w, float *const *y,
                      bool accumulate, em_scratch *s) {
    int64_t tiles = 0, work = 0;
    for (int i = 0; i < count; i++) {
        tiles += tile_count(w[i], tile_height(w[i], s->threads));
        work += em_product_work(T, w[i]->shape[0] * w[i]->shape[1]);
    }
    bool parallel = tiles > 1 && work >= EM_PARALLEL_MIN_WORK;
    em_matmul_quantize(xp, T, (int)w[0]->shape[0], count, w, s);
    em_schedule_tiles(T);
#pragma omp parallel for schedule(runtime) num_threads(s->threads) if (parallel)
    for (int64_t tile = 0; tile < tiles; tile++) {
        /* which weight, and which of its tiles */
        int i = 0;
        int64_t first = tile;
        while (first >= tile_count(w[i], tile_height(w[i], s->threads))) {
            first -= tile_count(w[i], tile_height(w[i], s->threads));
            i++;
        }
        int height = tile_height(w[i], s->threads);
        int64_t row0 = first * height;
        int rows = tile_rows(w[i], row0, height);
        float *ct = em_matmul_tile_rows(w[i], xp, T, row0, rows, s, s->buf[omp_get_thread_num()]);
        em_transpose(ct, em_gemm_result_stride(T), rows, T, y[i] + row0, (size_t)w[i]->shape[1],
                     accumulate);
    }
}

void em_matmul_swiglu_packed(const float *xp, int T, const em_tensor *w_gate, const em_tensor *w_up,
                             em_activation act, float *hp, em_scratch *s) {
    void (*gate_fn)(float *, const float *, size_t) =
        act == EM_ACTIVATION_GELU_TANH ? em_geglu : em_swiglu;
    int height = tile_height(w_gate, s->threads);
    int64_t F = w_gate->shape[1], tiles = tile_count(w_gate, height);
    size_t ldc = em_gemm_result_stride(T);
    int panels = em_gemm_panel_count(T), width = em_gemm_panel_width(T);
    bool parallel =
        tiles > 1 && em_product_work(T, 2 * w_gate->shape[0] * F) >= EM_PARALLEL_MIN_WORK;
    const em_tensor *both[2] = {w_gate, w_up};
    em_matmul_quantize(xp, T, (int)w_gate->shape[0], 2, both, s);
    em_schedule_tiles(T);
#pragma omp parallel for schedule(runtime) num_threads(s->threads) if (parallel)
    for (int64_t tile = 0; tile < tiles; tile++) {
        int64_t row0 = tile * height;
        int rows = tile_rows(w_gate, row0, height);
        float *buf = s->buf[omp_get_thread_num()];
        /* gate and up rows row0.., transposed: (rows, ldc) each */
        float *gate = em_matmul_tile_rows(w_gate, xp, T, row0, rows, s, buf);
        float *up = em_matmul_tile_rows(w_up, xp, T, row0, rows, s,
                                        buf + tile_result_floats(T, EM_MATMUL_TILE_ROWS));
        /* the tile's rows closed up to (rows, T), gated in one call (elementwise: the same bits
         * as row by row, and no padding tokens: a decoding step has 1 token of 16 a panel) */
        for (int j = 0; j < rows; j++) { /* forward: every entry moves to a lower address */
            for (int t = 0; t < T; t++) {
                gate[(size_t)j * T + t] = gate[(size_t)j * ldc + t];
                up[(size_t)j * T + t] = up[(size_t)j * ldc + t];
            }
        }
        gate_fn(gate, up, (size_t)rows * T);
        /* feature row0+j's segments of `width` tokens are the packed panels' entries at column
         * row0+j, the padding tokens zeros: panel p's rows of the tile, (rows, width), are one
         * run of memory, zeroed at once where the panel has padding (a narrow panel has none) */
        for (int p = 0; p < panels; p++) {
            float *to = hp + ((size_t)p * F + (size_t)row0) * width;
            int n = em_gemm_panel_tokens(T, p);
            if (n < width) memset(to, 0, (size_t)rows * width * sizeof(float));
            for (int j = 0; j < rows && n > 0; j++) {
                const float *h = gate + (size_t)j * T + (size_t)p * width;
                for (int t = 0; t < n; t++) to[(size_t)j * width + t] = h[t];
            }
        }
    }
}
