/* bench_dequantize: the cost of turning weights into floats, per type of the tensor-type table:
 * the row function this CPU runs (and the C one, where an AVX2 one exists) on 64 rows of
 * 768 random values, best of 50 runs, in nanoseconds of thread CPU time per value. The forward
 * converts each weight once per window (stages/kernels/cpu/matmul.c), where the GEMM spends
 * 2 * n_ctx FLOPs on it, so this is the conversion's share of a window. Run by
 * tools/bench-forward; usage: bench_dequantize. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "stages/formats/ggml_types.h"

#define ROWS 64
#define N_IN 768

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Best nanoseconds per value of fn over ROWS rows of row_bytes at src. */
static double time_rows(em_ggml_row_fn *fn, const unsigned char *src, size_t row_bytes,
                        float *dst) {
    double best = 1e30;
    for (int rep = 0; rep < 50; rep++) {
        double t0 = cpu_seconds();
        for (int r = 0; r < ROWS; r++) fn(src + (size_t)r * row_bytes, dst + r * N_IN, N_IN);
        double dt = cpu_seconds() - t0;
        if (dt < best) best = dt;
    }
    return best / (ROWS * N_IN) * 1e9;
}

int main(void) {
    float *dst = malloc(sizeof(float) * ROWS * N_IN);
    printf("dequantization, one thread, ns per value (rows of %d):\n", N_IN);
    for (uint32_t id = 0; id < 256; id++) {
        const em_ggml_type_info *t = em_ggml_type_info_get(id);
        if (!t || !t->to_float || N_IN % t->block_size) continue;
        size_t row_bytes = (size_t)(N_IN / t->block_size) * t->block_bytes;
        unsigned char *src = malloc(row_bytes * ROWS);
        /* bytes below 0x40: halves and floats of modest size, no NaN or infinity */
        for (size_t i = 0; i < row_bytes * ROWS; i++) src[i] = (unsigned char)(rand() & 0x3f);
        em_ggml_row_fn *fast = em_ggml_row_function(t);
        printf("  %-8s %6.3f", t->name, time_rows(fast, src, row_bytes, dst));
        if (fast != t->to_float)
            printf("  (C loops %.3f)", time_rows(t->to_float, src, row_bytes, dst));
        printf("\n");
        free(src);
    }
    free(dst);
    return 0;
}
