/* Benchmark of the CPU forward (run by tools/bench-forward): loads a model, runs a few windows of
 * n_ctx tokens through em_llama_forward and prints tokens/s, achieved GFLOP/s (2 FLOPs per
 * multiply-add of every matmul, attention included), OpenBLAS sgemm GFLOP/s measured on this
 * machine at M=n_ctx, N=K=dim with the same threads, their ratio, and the forward's peak RSS
 * against the model file size plus the activations and scratch it holds; last, the GEMM peak of
 * the kernel the forward runs on (gemm_peak.h: F32 weights for the exact precision, the FFN's
 * weight type for ggml) and the forward's GFLOP/s as a share of it.
 *
 * Memory: peak RSS is read once at the start (the process and its libraries), once after the
 * warm-up window (the forward's peak, before the sgemm reference allocates anything) and at the
 * end. The forward's share is the second minus the first; less the activations and scratch the
 * forward reports (em_llama_forward_memory), what is left is the model's, compared with the file.
 *
 * The reference is measured fairly: after each forward window, single-threaded sgemm runs on every
 * thread at M=n_ctx, N=K=dim for as many FLOPs as the window did, so both see the machine in the
 * same state for the same time;
 * the ratio of each pair is taken and the median over windows reported (a best-of-few short sgemm
 * calls would catch the machine's luckiest milliseconds and overstate the reference).
 * Usage: bench_forward MODEL [N_CTX=512] [WINDOWS=3] [THREADS=all cores] [PRECISION=exact]
 * (PRECISION: exact, ggml or bf16, the forward's `precision`). */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "gemm_peak.h"
#include "stages/kernels/cpu/ggml_dot.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"
#include "util/clock.h"

/* The sgemm reference: C (M, N) = A (M, K) B^T by single-threaded OpenBLAS sgemm on each of
 * `threads` OpenMP threads at once (each with its own output): the machine's sgemm throughput at
 * this shape on those cores, free of any partitioning overhead and measured with the same OpenMP
 * threads the forward uses (so no thread pool waits on another). */
typedef struct sgemm_reference {
    int M, N, K;
    float *a, *b;
    float **c; /* one output per thread */
    int threads;
} sgemm_reference;

static void reference_init(sgemm_reference *r, int M, int N, int K, int threads) {
    r->M = M, r->N = N, r->K = K, r->threads = threads;
    r->a = malloc((size_t)M * K * sizeof(float));
    r->b = malloc((size_t)N * K * sizeof(float));
    r->c = malloc((size_t)threads * sizeof *r->c);
    for (int t = 0; t < threads; t++) r->c[t] = malloc((size_t)M * N * sizeof(float));
    for (size_t i = 0; i < (size_t)M * K; i++) r->a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++) r->b[i] = (float)(i % 5) * 0.1f;
}

/* Runs sgemm on `threads` threads until at least `flops` were done in all; the achieved FLOPs,
 * wall and CPU seconds. */
static double reference_run(const sgemm_reference *r, int threads, double flops, double *seconds,
                            double *cpu) {
    double per_call = 2.0 * r->M * r->N * r->K;
    int calls = (int)(flops / per_call / threads + 0.999);
    if (calls < 1) calls = 1;
    double t0 = em_clock_seconds(), c0 = em_clock_process_cpu_seconds();
#pragma omp parallel num_threads(threads)
    {
        float *c = r->c[omp_get_thread_num()];
        for (int i = 0; i < calls; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r->M, r->N, r->K, 1.0f, r->a, r->K,
                        r->b, r->K, 0.0f, c, r->N);
    }
    *seconds = em_clock_seconds() - t0;
    *cpu = em_clock_process_cpu_seconds() - c0;
    return per_call * calls * threads;
}

static void reference_free(sgemm_reference *r) {
    for (int t = 0; t < r->threads; t++) free(r->c[t]);
    free(r->c);
    free(r->a);
    free(r->b);
}

static int compare_doubles(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Peak resident set of the process so far, MiB. */
static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

/* The weight type whose products dominate: the first layer's FFN gate (F32 when absent). */
static em_tensor_type ffn_type(const em_model *m) {
    for (size_t i = 0; i < m->tensor_count; i++)
        if (strcmp(m->tensors[i].name, "blk.0.ffn_gate.weight") == 0) return m->tensors[i].type;
    return EM_TENSOR_F32;
}

/* Prints the GEMM peak of the forward's kernel and the forward's median GFLOP/s as a share. */
static void report_peak(const em_model *m, em_llama_forward *f, em_precision precision, int threads,
                        double forward_gflops) {
    em_tensor_type type = precision == EM_PRECISION_GGML ? ffn_type(m) : EM_TENSOR_F32;
    bool covered = precision == EM_PRECISION_GGML && em_ggml_dot_type_of(type) >= 0;
    bool bf16 = precision == EM_PRECISION_BF16;
    const char *kernel = covered ? em_llama_forward_ggml_kernel(f)
                         : bf16  ? em_llama_forward_bf16_kernel(f)
                                 : em_llama_forward_kernel(f);
    em_precision measured = covered ? EM_PRECISION_GGML
                            : bf16  ? EM_PRECISION_BF16
                                    : EM_PRECISION_EXACT;
    double peak;
    const char *used;
    em_status err = gemm_peak_gflops(kernel, measured, covered ? type : EM_TENSOR_F32, GEMM_PEAK_N,
                                     threads, &peak, &used);
    if (err) {
        printf("  kernel peak     not measured: %s\n", err->message);
        em_error_free(err);
        return;
    }
    printf("  kernel peak     %10.1f GFLOP/s (%s %s on %s weights, square %d product); the "
           "forward at %.1f%% of it\n",
           peak, em_precision_name(measured), used,
           em_tensor_type_name(covered ? type : EM_TENSOR_F32), GEMM_PEAK_N,
           100.0 * forward_gflops / peak);
}

int main(int argc, char **argv) {
    double rss_start = peak_rss_mib();
    /* the reference calls sgemm on each OpenMP thread: OpenBLAS must not split those further */
    openblas_set_num_threads(1);
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [N_CTX] [WINDOWS] [THREADS] [exact|ggml|bf16]\n", argv[0]);
        return 2;
    }
    int n_ctx = argc > 2 ? atoi(argv[2]) : 512;
    int windows = argc > 3 ? atoi(argv[3]) : 3;
    int threads = argc > 4 ? atoi(argv[4]) : omp_get_num_procs();
    em_precision precision = EM_PRECISION_EXACT;
    if (argc > 5 && !em_precision_parse(argv[5], &precision)) {
        fprintf(stderr, "error: precision '%s' is not exact, ggml or bf16\n", argv[5]);
        return 2;
    }
    bool ggml = precision == EM_PRECISION_GGML;
    em_model *m;
    em_status err = em_model_load(argv[1], &m);
    if (err) {
        fprintf(stderr, "error: %s\n", err->message);
        return err->exit_code;
    }
    const em_llama_config *c = &m->config;
    em_llama_forward *f;
    err = em_llama_forward_new(m, threads, &f);
    if (!err) err = em_llama_forward_set_precision(f, precision);
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
    double flops = em_llama_forward_flops(c, n_ctx, 0); /* per window */
    sgemm_reference ref;
    reference_init(&ref, n_ctx, c->dim, c->dim, threads);
    /* one window (and one reference block) to warm up, then the timed pairs */
    err = em_llama_forward_window(f, ids, ids + 1, n_ctx, 0, nll, argmax);
    double rss_forward = peak_rss_mib() - rss_start;
    double warm_s, warm_cpu;
    reference_run(&ref, threads, flops, &warm_s, &warm_cpu);
    double seconds = 0, best = 1e30, ref_gflops_sum = 0;
    double *ratio = malloc((size_t)windows * sizeof *ratio);
    double *ratio_cpu = malloc((size_t)windows * sizeof *ratio_cpu);
    double *fwd_gflops = malloc((size_t)windows * sizeof *fwd_gflops);
    for (int w = 0; w < windows && !err; w++) {
        double t0 = em_clock_seconds(), c0 = em_clock_process_cpu_seconds();
        err = em_llama_forward_window(f, ids, ids + 1, n_ctx, 0, nll, argmax);
        double dt = em_clock_seconds() - t0, dc = em_clock_process_cpu_seconds() - c0;
        double ref_s, ref_cpu;
        double ref_flops = reference_run(&ref, threads, flops, &ref_s, &ref_cpu);
        seconds += dt;
        if (dt < best) best = dt;
        fwd_gflops[w] = flops / dt / 1e9;
        ref_gflops_sum += ref_flops / ref_s / 1e9;
        ratio[w] = (flops / dt) / (ref_flops / ref_s);
        ratio_cpu[w] = (flops / dc) / (ref_flops / ref_cpu);
    }
    if (err) {
        fprintf(stderr, "error: %s\n", err->message);
        return err->exit_code;
    }
    double sgemm1_s, sgemm1_cpu;
    double sgemm1_flops = reference_run(&ref, 1, flops / 4, &sgemm1_s, &sgemm1_cpu);
    reference_free(&ref);
    double file_mib = m->file_size / 1048576.0;
    double buffers_mib = em_llama_forward_memory(f) / 1048576.0;
    char type[64] = ""; /* the matrices' types, "Q4_K+Q6_K" for a mix */
    for (size_t i = 0; i < m->tensor_count; i++) {
        const char *name = em_tensor_type_name(m->tensors[i].type);
        if (m->tensors[i].n_dims == 2 && !strstr(type, name))
            snprintf(type + strlen(type), sizeof type - strlen(type), "%s%s", type[0] ? "+" : "",
                     name);
    }
    printf("model %s (%s, dim %d, %d layers, ffn %d, vocab %d), n_ctx %d, %d windows, %d threads, "
           "%s kernel, precision %s%s%s\n",
           argv[1], type, c->dim, c->n_layers, c->ffn_dim, c->n_vocab, n_ctx, windows, threads,
           em_llama_forward_kernel(f), em_precision_name(precision),
           ggml                             ? " with dot kernel "
           : precision == EM_PRECISION_BF16 ? " with kernel "
                                            : "",
           ggml                              ? em_llama_forward_ggml_kernel(f)
           : em_llama_forward_bf16_kernel(f) ? em_llama_forward_bf16_kernel(f)
                                             : "");
    printf("  tokens/s        %10.1f  mean, %.1f fastest window\n", n_ctx * windows / seconds,
           n_ctx / best);
    printf("  forward GFLOP/s %10.1f  median window (%.1f GFLOP per window)\n",
           median(fwd_gflops, windows), flops / 1e9);
    printf("  sgemm GFLOP/s   %10.1f  with %d threads between the windows, %.1f with 1 thread "
           "(M=%d, N=K=%d)\n",
           ref_gflops_sum / windows, threads, sgemm1_flops / sgemm1_s / 1e9, n_ctx, c->dim);
    printf("  ratio           %10.1f%% of sgemm (median of %d window/sgemm pairs)\n",
           100.0 * median(ratio, windows), windows);
    printf("  per CPU-second  %10.1f%% of sgemm (median of the pairs, CPU time)\n",
           100.0 * median(ratio_cpu, windows));
    printf("  forward RSS     %10.1f MiB over the process start (%.1f MiB): model file %.1f MiB, "
           "activations and scratch %.1f MiB\n",
           rss_forward, rss_start, file_mib, buffers_mib);
    printf("  RSS less buffers %9.2fx the model file (goal: at most 1.20x); whole process with the "
           "reference: %.1f MiB\n",
           (rss_forward - buffers_mib) / file_mib, peak_rss_mib());
    report_peak(m, f, precision, threads, median(fwd_gflops, windows));
    free(ratio);
    free(ratio_cpu);
    free(fwd_gflops);
    free(ids);
    free(nll);
    free(argmax);
    em_llama_forward_free(f);
    em_model_free(m);
    return 0;
}
