/* The attention kernels' throughput (see attention_bench.h). */
#include "stages/kernels/cuda/attention_bench.h"

#include <math.h>

#include "stages/kernels/cuda/attention_table.cuh"

/* x (n) uniform in [-1, 1) from a hash of (seed, i). */
static __global__ void fill_uniform(float *x, int64_t n, uint32_t seed) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u ^ seed;
        z = (z ^ (z >> 15)) * 2246822519u;
        z = (z ^ (z >> 13)) * 3266489917u;
        z ^= z >> 16;
        x[i] = (float)(z >> 8) * 0x1p-23f - 1.0f;
    }
}

em_status em_cuda_attention_tflops(bool half, int n_heads, int n_kv_heads, int head_dim, int T,
                                   int reps, double *tflops, const char **kernel) {
    em_cuda_attention_shape shape = {n_heads, n_kv_heads, head_dim};
    const em_cuda_attention_kernel *kern =
        em_cuda_attention_kernel_for(half ? EM_CUDA_COMPUTE_HALF : EM_CUDA_COMPUTE_FP32, &shape);
    if (!kern)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "attention benchmark: no kernel runs %d/%d heads of dimension %d",
                            n_heads, n_kv_heads, head_dim);
    *kernel = kern->name;
    size_t QD = (size_t)n_heads * head_dim, KVD = (size_t)n_kv_heads * head_dim;
    float *q = NULL, *k = NULL, *v = NULL, *att = NULL;
    int32_t *dev_offsets = NULL, offsets[2] = {0, T};
    cudaEvent_t start = NULL, stop = NULL;
    em_cuda_attention_work *work = em_cuda_attention_work_new();
    cudaError_t e = cudaMalloc((void **)&q, (size_t)T * QD * 4);
    if (e == cudaSuccess) e = cudaMalloc((void **)&k, (size_t)T * KVD * 4);
    if (e == cudaSuccess) e = cudaMalloc((void **)&v, (size_t)T * KVD * 4);
    if (e == cudaSuccess) e = cudaMalloc((void **)&att, (size_t)T * QD * 4);
    if (e == cudaSuccess) e = cudaMalloc((void **)&dev_offsets, sizeof offsets);
    if (e == cudaSuccess)
        e = cudaMemcpy(dev_offsets, offsets, sizeof offsets, cudaMemcpyHostToDevice);
    float ms = 0.0f;
    if (e == cudaSuccess) {
        fill_uniform<<<1024, 256>>>(q, (int64_t)T * QD, 1);
        fill_uniform<<<1024, 256>>>(k, (int64_t)T * KVD, 2);
        fill_uniform<<<1024, 256>>>(v, (int64_t)T * KVD, 3);
        em_cuda_segments seg = {1, offsets, dev_offsets};
        em_cuda_attention_args a = {
            q, k, v, &seg, shape, {1.0f / sqrtf((float)head_dim), 0.0f, 0}, att, NULL, NULL, NULL};
        cudaEventCreate(&start);
        cudaEventCreate(&stop);
        for (int i = 0; i <= reps && e == cudaSuccess; i++) {
            if (i == 1) cudaEventRecord(start); /* the first call warms up and plans */
            e = kern->run(work, &a);
        }
        cudaEventRecord(stop);
        if (e == cudaSuccess) e = cudaEventSynchronize(stop);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
    }
    if (e == cudaSuccess)
        *tflops =
            4.0 * head_dim * n_heads * ((double)T * (T + 1) / 2.0) * reps / (ms * 1e-3) / 1e12;
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    em_cuda_attention_work_free(work);
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(att);
    cudaFree(dev_offsets);
    return e == cudaSuccess ? NULL
                            : em_error_new(EM_EXIT_RUNTIME, "cuda: attention benchmark (%s): %s",
                                           kern->name, cudaGetErrorString(e));
}
