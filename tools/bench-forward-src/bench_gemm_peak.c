/* Each CPU kernel's GEMM peak on this machine (gemm_peak.h), run by tools/bench-forward before the
 * models: the exact precision's GEMM microkernels (avx512, avx2, c) with F32 weights, and the ggml
 * precision's dot-product kernels (amx, avx512vnni, avxvnni, avx2, c) on each weight type given,
 * and the bf16 precision's kernels (avx512bf16, avx512, c) with F32 weights. A kernel this CPU
 * lacks is named and skipped. The plain C kernels are measured only when KERNELS names c: they are
 * the fallback of CPUs without AVX2, and the exact one's square product takes minutes (about 0.1
 * GFLOP/s on a Zen 3 core, where avx2 gives 28 with 2 threads).
 * Usage: bench_gemm_peak [THREADS=all cores] [GGML_TYPES=Q8_0,Q4_0,Q4_1,Q4_K,Q6_K]
 *                        [KERNELS=avx512,amx,avx512vnni,avxvnni,avx2,avx512bf16] */
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_peak.h"

static const char *const exact_kernels[] = {"avx512", "avx2", "c"};
static const char *const ggml_kernels[] = {"amx", "avx512vnni", "avxvnni", "avx2", "c"};
static const char *const bf16_kernels[] = {"avx512bf16", "avx512", "c"};

/* Whether the comma-separated list names kernel. */
static bool listed(const char *list, const char *kernel) {
    size_t n = strlen(kernel);
    for (const char *p = list; (p = strstr(p, kernel)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

static void report(const char *precision, const char *kernel, em_tensor_type type, int threads) {
    double gflops;
    const char *used;
    em_precision p = EM_PRECISION_EXACT;
    em_precision_parse(precision, &p);
    em_status err = gemm_peak_gflops(kernel, p, type, GEMM_PEAK_N, threads, &gflops, &used);
    if (err) {
        printf("  %-6s %-10s %-5s skipped: %s\n", precision, kernel, em_tensor_type_name(type),
               err->message);
        em_error_free(err);
        return;
    }
    printf("  %-6s %-10s %-5s %8.1f GFLOP/s\n", precision, used, em_tensor_type_name(type), gflops);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_num_procs();
    char types[256] = "Q8_0,Q4_0,Q4_1,Q4_K,Q6_K";
    if (argc > 2) snprintf(types, sizeof types, "%s", argv[2]);
    const char *kernels = argc > 3 ? argv[3] : "avx512,amx,avx512vnni,avxvnni,avx2,avx512bf16";
    printf("GEMM peak per kernel: y = x W^T, x (%d, %d), W (%d, %d), %d threads, best of 3\n",
           GEMM_PEAK_N, GEMM_PEAK_N, GEMM_PEAK_N, GEMM_PEAK_N, threads);
    for (size_t k = 0; k < sizeof exact_kernels / sizeof *exact_kernels; k++)
        if (listed(kernels, exact_kernels[k]))
            report("exact", exact_kernels[k], EM_TENSOR_F32, threads);
    for (size_t k = 0; k < sizeof bf16_kernels / sizeof *bf16_kernels; k++)
        if (listed(kernels, bf16_kernels[k]))
            report("bf16", bf16_kernels[k], EM_TENSOR_F32, threads);
    for (char *name = strtok(types, ","); name; name = strtok(NULL, ",")) {
        const em_ggml_type_info *info = em_ggml_type_by_name(name);
        if (!info) {
            fprintf(stderr, "bench_gemm_peak: unknown type %s\n", name);
            return 2;
        }
        for (size_t k = 0; k < sizeof ggml_kernels / sizeof *ggml_kernels; k++)
            if (listed(kernels, ggml_kernels[k]))
                report("ggml", ggml_kernels[k], info->id, threads);
    }
    return 0;
}
