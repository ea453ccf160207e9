/* Benchmark of the CPU forward (run by tools/bench-forward): loads a model, runs a few windows of
 * n_ctx tokens through em_llama_forward and prints tokens/s, achieved GFLOP/s (2 FLOPs per
 * multiply-add of every matmul, attention included), OpenBLAS sgemm GFLOP/s measured on this
 * machine at M=n_ctx, N=K=dim (single-threaded and with all threads), their ratio, and peak RSS
 * against the model file size.
 * Usage: bench_forward MODEL [N_CTX=512] [WINDOWS=3] [THREADS=all cores] */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/model.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of all threads of the process: on a shared machine, time spent descheduled does not
 * count, so GFLOP per CPU-second compares kernels fairly when other jobs run. */
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* GFLOP/s of C (M, N) = A (M, K) B^T with OpenBLAS using `threads` threads (best of 5), and
 * GFLOP per CPU-second (best of 5) in *per_cpu_second. */
static double sgemm_gflops(int M, int N, int K, int threads, double *per_cpu_second) {
    float *a = malloc((size_t)M * K * sizeof(float)), *b = malloc((size_t)N * K * sizeof(float));
    float *c = malloc((size_t)M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 5) * 0.1f;
    openblas_set_num_threads(threads);
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now_seconds(), c0 = cpu_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        double dt = now_seconds() - t0, dc = cpu_seconds() - c0;
        if (rep > 0 && dt < best) best = dt; /* the first call warms up */
        if (rep > 0 && dc < best_cpu) best_cpu = dc;
    }
    *per_cpu_second = 2.0 * M * N * K / best_cpu / 1e9;
    openblas_set_num_threads(1);
    free(a);
    free(b);
    free(c);
    return 2.0 * M * N * K / best / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [N_CTX] [WINDOWS] [THREADS]\n", argv[0]);
        return 2;
    }
    int n_ctx = argc > 2 ? atoi(argv[2]) : 512;
    int windows = argc > 3 ? atoi(argv[3]) : 3;
    int threads = argc > 4 ? atoi(argv[4]) : omp_get_num_procs();
    em_model *m;
    em_status err = em_model_load(argv[1], &m);
    if (err) {
        fprintf(stderr, "error: %s\n", err->message);
        return err->exit_code;
    }
    const em_llama_config *c = &m->config;
    em_llama_forward *f;
    err = em_llama_forward_new(m, threads, &f);
    if (err) {
        fprintf(stderr, "error: %s\n", err->message);
        return err->exit_code;
    }
    int32_t *ids = malloc((size_t)(n_ctx + 1) * sizeof *ids);
    uint32_t seed = 12345;
    for (int i = 0; i <= n_ctx; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (uint32_t)c->n_vocab);
    }
    double *nll = malloc((size_t)n_ctx * sizeof *nll);
    int32_t *argmax = malloc((size_t)n_ctx * sizeof *argmax);
    /* one window to fault in the mapped weights, then the timed ones */
    err = em_llama_forward_window(f, ids, ids + 1, n_ctx, 0, nll, argmax);
    /* the machine may be shared: report the mean and the fastest window */
    double seconds = 0, best = 1e30, best_cpu = 1e30;
    for (int w = 0; w < windows && !err; w++) {
        double t0 = now_seconds(), c0 = cpu_seconds();
        err = em_llama_forward_window(f, ids, ids + 1, n_ctx, 0, nll, argmax);
        double dt = now_seconds() - t0, dc = cpu_seconds() - c0;
        seconds += dt;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    if (err) {
        fprintf(stderr, "error: %s\n", err->message);
        return err->exit_code;
    }
    double flops = em_llama_forward_flops(c, n_ctx, 0); /* per window */
    double gflops = flops / best / 1e9;
    double gflops_cpu = flops / best_cpu / 1e9;
    double sgemm1_cpu, sgemm_all_cpu;
    double sgemm1 = sgemm_gflops(n_ctx, c->dim, c->dim, 1, &sgemm1_cpu);
    double sgemm_all = sgemm_gflops(n_ctx, c->dim, c->dim, threads, &sgemm_all_cpu);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mib = ru.ru_maxrss / 1024.0, file_mib = m->file_size / 1048576.0;
    const char *type = em_tensor_type_name(m->layers[0].wq->type);
    printf("model %s (%s, dim %d, %d layers, ffn %d, vocab %d), n_ctx %d, %d windows, %d threads\n",
           argv[1], type, c->dim, c->n_layers, c->ffn_dim, c->n_vocab, n_ctx, windows, threads);
    printf("  tokens/s        %10.1f  mean, %.1f fastest window\n", n_ctx * windows / seconds,
           n_ctx / best);
    printf("  forward GFLOP/s %10.1f  fastest window (%.1f GFLOP per window)\n", gflops,
           flops / 1e9);
    printf("  sgemm GFLOP/s   %10.1f  1 thread, %.1f with %d threads (M=%d, N=K=%d)\n", sgemm1,
           sgemm_all, threads, n_ctx, c->dim);
    printf("  ratio           %10.1f%% of sgemm with %d threads\n", 100.0 * gflops / sgemm_all,
           threads);
    printf("  per CPU-second  %10.1f  GFLOP forward, %.1f sgemm with %d threads: %.1f%%\n",
           gflops_cpu, sgemm_all_cpu, threads, 100.0 * gflops_cpu / sgemm_all_cpu);
    printf("  peak RSS        %10.1f MiB, model file %.1f MiB (%.2fx)\n", rss_mib, file_mib,
           rss_mib / file_mib);
    free(ids);
    free(nll);
    free(argmax);
    em_llama_forward_free(f);
    em_model_free(m);
    return 0;
}
