/* bench_gpu: prompt-scoring throughput of the cuda forward on one GPU (run by tools/gpu-check).
 *   bench_gpu [--quick]
 * First the practical ceiling: a BF16 GEMM (8192^3, FP32 accumulation) through the forward's own
 * cuBLASLt path (one fixed algorithm, split-K off), measured here, with the algorithm it chose,
 * and the attention kernels alone (attention_bench.h) at Llama-3-8B's heads, n_ctx 2048 and 8192.
 * Each model's line then says whether its GEMM plans keep rows bit-identical (batching needs it).
 * Then Llama-3-8B-shaped (dim 4096, 32 layers, 32/8 heads, ffn 14336, vocab 128256) and
 * Llama-3.2-1B-shaped (dim 2048, 16 layers, 32/8 heads, ffn 8192, vocab 128256) models with BF16
 * weights generated on the device from a seed (nothing read or written on disk), scoring whole
 * windows (every position, as prompt scoring does) of n_ctx 2048 and 8192, one window per call,
 * and n_ctx 2048 in batches of BATCH_WINDOWS windows per call (score_batch, the forward's default
 * batch_tokens on cuda): tokens/s, model FLOPs utilization against the H200's dense BF16 peak
 * (989 TFLOP/s) and the share of the measured GEMM, with device memory (weights, activations, in
 * use after the runs). The 8B shape also runs with int4 weight-only layers (TORCHAO_I4_G128 and
 * Q4_0 blocks generated on the device, kept quantized and dequantized to BF16 before each
 * product, device_weights.cuh) at n_ctx 2048: tokens/s against the BF16 weights', and the device
 * memory in use against weights + activations + dequantize scratch (what the forward holds; the
 * difference is the CUDA context, cuBLAS and the allocator). One warm-up call, then timed calls
 * (wall clock: each ends with its results on the host). --quick times one call per case. Prints
 * one line per case, "bench: ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/kernels/cuda/attention_bench.h"
#include "stages/kernels/cuda/cuda_forward.h"
#include "stages/formats/torchao_types.h"

#define H200_BF16_PEAK_TFLOPS 989.0
#define BATCH_WINDOWS 8 /* n_ctx 2048 windows per batch: 16384 tokens */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static em_llama_config llama_shape(int dim, int layers, int heads, int kv_heads, int ffn) {
    em_llama_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.architecture, sizeof c.architecture, "llama");
    c.n_vocab = 128256;
    c.dim = dim;
    c.n_layers = layers;
    c.ffn_dim = ffn;
    c.n_heads = heads;
    c.n_kv_heads = kv_heads;
    c.head_dim = dim / heads;
    c.rope_dim = c.head_dim;
    c.n_ctx_train = 8192;
    c.rope_freq_base = 500000.0f;
    c.rope_scaling = EM_ROPE_SCALING_NONE;
    c.rms_eps = 1e-5f;
    c.activation = EM_ACTIVATION_SILU;
    c.embed_scale = 1.0f;
    c.attn_scale_base = c.head_dim;
    return c;
}

static int fail(em_status err) {
    fprintf(stderr, "bench_gpu: %s\n", err->message);
    em_error_free(err);
    return 4;
}

/* Times calls of `windows` windows of n_ctx each (one batch) on forward f; prints the case's
 * line and gives its tokens/s. */
static em_status bench_case(const char *name, const em_llama_config *c, void *f, int n_ctx,
                            int windows, int reps, double gemm_tflops, double *tokens_per_s) {
    const em_forward_backend *be = &em_forward_backend_cuda;
    size_t tokens = (size_t)n_ctx * (size_t)windows;
    int32_t *ids = malloc((tokens + 1) * sizeof *ids);
    double *nll = malloc(tokens * sizeof *nll);
    int32_t *argmax = malloc(tokens * sizeof *argmax);
    em_batch_window *batch = malloc((size_t)windows * sizeof *batch);
    uint32_t seed = 1;
    for (size_t i = 0; i <= tokens; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (uint32_t)c->n_vocab);
    }
    for (int w = 0; w < windows; w++) {
        size_t at = (size_t)w * (size_t)n_ctx;
        batch[w] = (em_batch_window){ids + at, ids + at + 1, n_ctx, 0, nll + at, argmax + at};
    }
    em_status err = be->score_batch(f, batch, windows); /* warm-up */
    double t0 = now();
    for (int r = 0; r < reps && !err; r++) err = be->score_batch(f, batch, windows);
    double seconds = now() - t0;
    if (!err) {
        double tflops = em_llama_forward_flops(c, n_ctx, 0) * windows * reps / seconds / 1e12;
        char shape[64];
        if (windows > 1)
            snprintf(shape, sizeof shape, "n_ctx %d x %d per batch", n_ctx, windows);
        else
            snprintf(shape, sizeof shape, "n_ctx %d", n_ctx);
        *tokens_per_s = (double)tokens * reps / seconds;
        printf("bench: %s %s: %.0f tokens/s, %.1f TFLOP/s, MFU %.1f%% of %.0f, %.1f%% of the "
               "measured GEMM; weights %.2f GiB, activations %.2f GiB, device in use %.2f GiB\n",
               name, shape, (double)tokens * reps / seconds, tflops,
               100.0 * tflops / H200_BF16_PEAK_TFLOPS, H200_BF16_PEAK_TFLOPS,
               100.0 * tflops / gemm_tflops, be->weight_bytes(f) / 1073741824.0,
               be->memory(f) / 1073741824.0, em_cuda_device_used_bytes() / 1073741824.0);
        fflush(stdout);
    }
    free(ids);
    free(nll);
    free(argmax);
    free(batch);
    return err ? em_error_prefix(err, "%s n_ctx %d x %d", name, n_ctx, windows) : NULL;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (argc > 2 || (argc == 2 && !quick)) {
        fprintf(stderr, "usage: bench_gpu [--quick]\n");
        return 1;
    }
    em_status err = em_cuda_available();
    if (err) return fail(err);
    double gemm = 0.0;
    char algo[512];
    if ((err = em_cuda_gemm_tflops(8192, 8192, 8192, quick ? 5 : 20, &gemm, algo, sizeof algo)))
        return fail(err);
    printf("bench: cuBLASLt BF16 GEMM 8192^3: %.1f TFLOP/s (%.1f%% of %.0f)\n", gemm,
           100.0 * gemm / H200_BF16_PEAK_TFLOPS, H200_BF16_PEAK_TFLOPS);
    printf("bench: GEMM plan: %s\n", algo);
    fflush(stdout);
    /* the attention kernels alone at Llama-3-8B's heads (32/8 of 128): BF16 and FP32 modes */
    for (int n_ctx = 2048; n_ctx <= 8192; n_ctx *= 4)
        for (int half = 1; half >= 0; half--) {
            double tflops = 0.0;
            const char *kernel = NULL;
            if ((err = em_cuda_attention_tflops(half, 32, 8, 128, n_ctx, quick ? 1 : 5, &tflops,
                                                &kernel)))
                return fail(err);
            printf("bench: attention 32/8 heads of 128, n_ctx %d, %s: %.1f TFLOP/s\n", n_ctx,
                   kernel, tflops);
            fflush(stdout);
        }
    struct {
        const char *name;
        em_llama_config c;
        uint32_t layer_type; /* of the layers' matrices */
        bool long_ctx;       /* also n_ctx 8192 */
    } models[] = {
        {"llama3-8b-shape bf16", llama_shape(4096, 32, 32, 8, 14336), EM_TENSOR_BF16, true},
        {"llama3-8b-shape int4 TORCHAO_I4_G128 kept quantized", llama_shape(4096, 32, 32, 8, 14336),
         EM_TENSOR_TORCHAO_I4_G128, false},
        {"llama3-8b-shape int4 Q4_0 kept quantized", llama_shape(4096, 32, 32, 8, 14336),
         EM_TENSOR_Q4_0, false},
        {"llama3.2-1b-shape bf16", llama_shape(2048, 16, 32, 8, 8192), EM_TENSOR_BF16, true},
    };
    double bf16_8b = 0.0, bf16_8b_weights = 0.0; /* the 8B BF16 case's tokens/s and GiB */
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        void *f = NULL;
        double t0 = now();
        if ((err = em_cuda_forward_new_random(&models[i].c, 1, models[i].layer_type, 8, &f)))
            return fail(err);
        printf("bench: %s: weights generated on the device in %.1f s\n", models[i].name,
               now() - t0);
        char reason[1024];
        bool invariant = em_cuda_gemm_row_invariant(f, reason, sizeof reason);
        printf("bench: %s: GEMM plans row-invariant: %s%s\n", models[i].name,
               invariant ? "yes" : "NO: ", invariant ? "" : reason);
        const em_forward_backend *be = &em_forward_backend_cuda;
        /* (n_ctx, windows per call, timed calls): 8192 for the long_ctx shapes, batches for BF16 */
        int cases[3][3] = {{2048, 1, 4}, {8192, 1, 2}, {2048, BATCH_WINDOWS, 2}};
        for (int j = 0; j < 3 && !err; j++) {
            if ((j == 1 && !models[i].long_ctx) ||
                (j == 2 && models[i].layer_type != EM_TENSOR_BF16))
                continue;
            double tokens_per_s = 0.0;
            err = bench_case(models[i].name, &models[i].c, f, cases[j][0], cases[j][1],
                             quick ? 1 : cases[j][2], gemm, &tokens_per_s);
            if (!err && i == 0 && j == 0) {
                bf16_8b = tokens_per_s;
                bf16_8b_weights = be->weight_bytes(f) / 1073741824.0;
            }
            if (!err && j == 0 && models[i].layer_type != EM_TENSOR_BF16 && bf16_8b > 0.0) {
                double weights = be->weight_bytes(f) / 1073741824.0;
                double held = weights + be->memory(f) / 1073741824.0;
                printf("bench: %s n_ctx %d: %.2fx the BF16 weights' tokens/s; weights %.2f GiB "
                       "(BF16 %.2f GiB, %.2fx); weights + activations + scratch %.2f GiB, device "
                       "in use %.2f GiB\n",
                       models[i].name, cases[j][0], tokens_per_s / bf16_8b, weights,
                       bf16_8b_weights, weights / bf16_8b_weights, held,
                       em_cuda_device_used_bytes() / 1073741824.0);
                fflush(stdout);
            }
        }
        be->free(f);
        if (err) return fail(err);
    }
    return 0;
}
