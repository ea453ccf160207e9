/* Device allocations and CUDA failures as evalmesh errors (see device_memory.cuh). */
#include "stages/kernels/cuda/device_memory.cuh"

em_status em_cuda_error(cudaError_t e, const char *what) {
    return em_error_new(EM_EXIT_RUNTIME, "cuda: %s: %s", what, cudaGetErrorString(e));
}

em_status em_cuda_alloc(void **p, size_t bytes, size_t *counter) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return em_error_new(EM_EXIT_RUNTIME, "cuda: cannot allocate %.1f MiB of device memory: %s",
                            (double)bytes / (1 << 20), cudaGetErrorString(e));
    if (counter) *counter += bytes;
    return NULL;
}
