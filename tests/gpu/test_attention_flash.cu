/* The tensor-core attention (attention_flash.cuh) on a GPU, through the kernel table
 * (attention_table.cuh): random q, k, v for a batch of windows of 1, 17, 64, 200 and 1000
 * positions, heads 32/8 and 8/8 at head_dim 64 and 128 (and 8/8 at 256), with and without softcap
 * and sliding window:
 *  - against the FP32 kernel (kernels.cu's em_cuda_attention, the table's exact-mode row) within
 *    BF16_TOLERANCE at most and BF16_MEAN_TOLERANCE on average (inputs and probabilities are
 *    rounded to BF16; |v| < 1);
 *  - each window's rows bit-identical when the window is alone, in the batch, and in the batch in
 *    reverse order (other offsets, other tile order), and across repeated runs.
 * Exit 77 (skipped) without a usable CUDA device. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cuda/attention_table.cuh"
extern "C" {
#include "test.h"
}

#define BF16_TOLERANCE 2e-2
#define BF16_MEAN_TOLERANCE 2e-3
#define WINDOWS 5

static const int lens[WINDOWS] = {1, 17, 64, 200, 1000};

static void fill(float *x, size_t n, uint32_t seed, float bound) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)(seed >> 8) * 0x1p-24f * 2.0f - 1.0f) * bound;
    }
}

static bool ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return true;
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    CHECK(e == cudaSuccess);
    return false;
}

/* A batch on the device: the windows `order` in that order, rows copied from the host arrays
 * (laid out in the order of lens, at host_start). */
typedef struct batch {
    int32_t offsets[WINDOWS + 1];
    int32_t *dev_offsets;
    em_cuda_segments seg;
    float *q, *k, *v, *att;
} batch;

static bool batch_new(batch *b, const int *order, int count, const float *q, const float *k,
                      const float *v, const int *host_start, size_t QD, size_t KVD) {
    memset(b, 0, sizeof *b);
    b->offsets[0] = 0;
    for (int i = 0; i < count; i++) b->offsets[i + 1] = b->offsets[i] + lens[order[i]];
    size_t T = (size_t)b->offsets[count];
    bool good = ok(cudaMalloc((void **)&b->dev_offsets, sizeof b->offsets), "cudaMalloc") &&
                ok(cudaMalloc((void **)&b->q, T * QD * 4), "cudaMalloc") &&
                ok(cudaMalloc((void **)&b->k, T * KVD * 4), "cudaMalloc") &&
                ok(cudaMalloc((void **)&b->v, T * KVD * 4), "cudaMalloc") &&
                ok(cudaMalloc((void **)&b->att, T * QD * 4), "cudaMalloc");
    for (int i = 0; i < count && good; i++) {
        size_t at = (size_t)b->offsets[i], from = (size_t)host_start[order[i]];
        size_t n = (size_t)lens[order[i]];
        good = ok(cudaMemcpy(b->q + at * QD, q + from * QD, n * QD * 4, cudaMemcpyHostToDevice),
                  "upload q") &&
               ok(cudaMemcpy(b->k + at * KVD, k + from * KVD, n * KVD * 4, cudaMemcpyHostToDevice),
                  "upload k") &&
               ok(cudaMemcpy(b->v + at * KVD, v + from * KVD, n * KVD * 4, cudaMemcpyHostToDevice),
                  "upload v");
    }
    good = good &&
           ok(cudaMemcpy(b->dev_offsets, b->offsets, sizeof b->offsets, cudaMemcpyHostToDevice),
              "upload offsets");
    b->seg = em_cuda_segments{count, b->offsets, b->dev_offsets};
    return good;
}

static void batch_free(batch *b) {
    cudaFree(b->dev_offsets);
    cudaFree(b->q);
    cudaFree(b->k);
    cudaFree(b->v);
    cudaFree(b->att);
}

/* Runs kernel on batch b; its att (T, QD) into out. */
static bool run(const em_cuda_attention_kernel *kernel, em_cuda_attention_work *work, batch *b,
                em_cuda_attention_shape shape, em_cuda_mask mask, float *out) {
    size_t QD = (size_t)shape.n_heads * shape.head_dim;
    size_t T = (size_t)b->offsets[b->seg.count];
    if (!ok(cudaMemset(b->att, 0xff, T * QD * 4), "cudaMemset")) return false; /* NaN */
    em_cuda_attention_args a = {b->q, b->k, b->v, &b->seg, shape, mask, b->att, NULL, NULL, NULL};
    return ok(kernel->run(work, &a), kernel->name) && ok(cudaDeviceSynchronize(), kernel->name) &&
           ok(cudaMemcpy(out, b->att, T * QD * 4, cudaMemcpyDeviceToHost), "download att");
}

static void check_case(int H, int KV, int hd, float softcap, int window) {
    em_cuda_attention_shape shape = {H, KV, hd};
    em_cuda_mask mask = {1.0f / sqrtf((float)hd), softcap, window};
    const em_cuda_attention_kernel *flash =
        em_cuda_attention_kernel_for(EM_CUDA_COMPUTE_HALF, &shape);
    const em_cuda_attention_kernel *fp32 =
        em_cuda_attention_kernel_for(EM_CUDA_COMPUTE_FP32, &shape);
    CHECK(flash && flash->supports == em_flash_supports);
    CHECK(fp32 && fp32 != flash);
    if (!flash || !fp32 || flash->supports != em_flash_supports) return;

    size_t QD = (size_t)H * hd, KVD = (size_t)KV * hd;
    int host_start[WINDOWS], T = 0;
    for (int w = 0; w < WINDOWS; w++) host_start[w] = T, T += lens[w];
    float *q = (float *)malloc(T * QD * 4), *k = (float *)malloc(T * KVD * 4);
    float *v = (float *)malloc(T * KVD * 4);
    fill(q, T * QD, 11u + (uint32_t)hd, 2.0f); /* scores of a few units: the softcap matters */
    fill(k, T * KVD, 12u + (uint32_t)H, 2.0f);
    fill(v, T * KVD, 13u + (uint32_t)KV, 1.0f);
    float *want = (float *)malloc(T * QD * 4), *got = (float *)malloc(T * QD * 4);
    float *again = (float *)malloc(T * QD * 4), *other = (float *)malloc(T * QD * 4);
    em_cuda_attention_work *work = em_cuda_attention_work_new();

    int forward[WINDOWS] = {0, 1, 2, 3, 4}, reverse[WINDOWS] = {4, 3, 2, 1, 0};
    batch b{}, r{}; /* zeros: freeing one that was never made frees nothing */
    bool good = batch_new(&b, forward, WINDOWS, q, k, v, host_start, QD, KVD) &&
                batch_new(&r, reverse, WINDOWS, q, k, v, host_start, QD, KVD) &&
                run(fp32, work, &b, shape, mask, want) && run(flash, work, &b, shape, mask, got) &&
                run(flash, work, &b, shape, mask, again);
    if (good) {
        double worst = 0.0, total = 0.0;
        for (size_t i = 0; i < (size_t)T * QD; i++) {
            double d = fabs((double)got[i] - want[i]);
            if (d != d) d = INFINITY; /* NaN: a row not written, or 0 * garbage */
            worst = d > worst ? d : worst;
            total += d;
        }
        double mean = total / ((double)T * QD);
        printf("H %d/%d hd %d softcap %.1f window %d: max |flash - fp32| %.2e, mean %.2e\n", H, KV,
               hd, softcap, window, worst, mean);
        CHECK(worst <= BF16_TOLERANCE);
        CHECK(mean <= BF16_MEAN_TOLERANCE);
        CHECK(memcmp(got, again, (size_t)T * QD * 4) == 0); /* repeated runs */
    }
    /* in reverse order: each window's rows at other offsets */
    good = good && run(flash, work, &r, shape, mask, other);
    for (int i = 0; i < WINDOWS && good; i++) {
        int w = reverse[i];
        CHECK(memcmp(other + (size_t)r.offsets[i] * QD, got + (size_t)host_start[w] * QD,
                     (size_t)lens[w] * QD * 4) == 0);
    }
    /* each window alone */
    for (int w = 0; w < WINDOWS && good; w++) {
        batch one;
        good = batch_new(&one, &w, 1, q, k, v, host_start, QD, KVD) &&
               run(flash, work, &one, shape, mask, other);
        if (good)
            CHECK(memcmp(other, got + (size_t)host_start[w] * QD, (size_t)lens[w] * QD * 4) == 0);
        batch_free(&one);
    }
    /* the largest batch (T rows) set the BF16 copy of k and v */
    CHECK(em_cuda_attention_work_bytes(work) >= (size_t)2 * T * KVD * 2);
    batch_free(&b);
    batch_free(&r);
    em_cuda_attention_work_free(work);
    free(q);
    free(k);
    free(v);
    free(want);
    free(got);
    free(again);
    free(other);
}

int main(void) {
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        printf("skipped: no CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount: 0");
        return 77;
    }
    int heads[][2] = {{32, 8}, {8, 8}}, dims[] = {64, 128};
    for (int h = 0; h < 2; h++)
        for (int d = 0; d < 2; d++) {
            check_case(heads[h][0], heads[h][1], dims[d], 0.0f, 0);
            check_case(heads[h][0], heads[h][1], dims[d], 2.0f, 0);
            check_case(heads[h][0], heads[h][1], dims[d], 0.0f, 100);
            check_case(heads[h][0], heads[h][1], dims[d], 3.0f, 37);
        }
    check_case(8, 8, 256, 0.0f, 0);
    check_case(8, 8, 256, 2.0f, 100);
    if (test_failures)
        printf("FAILED: flash attention (%d of %d checks)\n", test_failures, test_checks);
    else
        printf("ok: flash attention within %.0e of the FP32 kernel, windows bit-identical across "
               "batches and runs\n",
               BF16_TOLERANCE);
    return test_finish();
}
