/* The tensor-parallel sum of partial products (see partial_sums.cuh). */
#include "stages/kernels/cuda/partial_sums.cuh"

/* One thread per element: the parts in rank order, then the residual add. */
static __global__ void sum_partials_kernel(float *out, const float *all, int parts, int64_t n,
                                           bool accumulate) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = all[i];
    for (int p = 1; p < parts; p++) sum += all[(size_t)p * (size_t)n + (size_t)i];
    out[i] = accumulate ? out[i] + sum : sum;
}

void em_cuda_sum_partials(float *out, const float *all, int parts, int64_t n, bool accumulate) {
    if (n == 0) return;
    sum_partials_kernel<<<(unsigned)((n + 255) / 256), 256>>>(out, all, parts, n, accumulate);
}
