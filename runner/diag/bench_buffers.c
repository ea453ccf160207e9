/* Host and GPU buffers for the communication benchmarks (see bench_buffers.h). */
#include "runner/diag/bench_buffers.h"

#include <stdlib.h>
#include <string.h>

#include "build_info.h"

#if EVALMESH_HAVE_CUDA
#include <cuda_runtime_api.h>

static em_status cuda_error(const char *what, cudaError_t e) {
    return em_error_new(EM_EXIT_RUNTIME, "%s: %s", what, cudaGetErrorString(e));
}
#endif

em_status em_bench_buffer_alloc(em_bench_buffer *buf, size_t bytes, bool on_device) {
    memset(buf, 0, sizeof *buf);
    buf->bytes = bytes;
    buf->host = malloc(bytes ? bytes : 1);
    if (!buf->host) return em_error_new(EM_EXIT_RUNTIME, "cannot allocate %zu bytes", bytes);
    buf->device = buf->host;
    if (!on_device) return NULL;
#if EVALMESH_HAVE_CUDA
    cudaError_t e = cudaMalloc(&buf->device, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        buf->device = NULL;
        free(buf->host);
        buf->host = NULL;
        return cuda_error("cudaMalloc", e);
    }
    buf->on_device = true;
    return NULL;
#else
    free(buf->host);
    buf->host = NULL;
    return em_error_new(EM_EXIT_BAD_INPUT, "GPU buffers need a build with CUDA");
#endif
}

void em_bench_buffer_free(em_bench_buffer *buf) {
#if EVALMESH_HAVE_CUDA
    if (buf->on_device && buf->device) cudaFree(buf->device);
#endif
    free(buf->host);
    memset(buf, 0, sizeof *buf);
}

em_status em_bench_buffer_upload(em_bench_buffer *buf, size_t bytes) {
    if (!buf->on_device) return NULL;
#if EVALMESH_HAVE_CUDA
    cudaError_t e = cudaMemcpy(buf->device, buf->host, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return cuda_error("cudaMemcpy to the GPU", e);
#endif
    return NULL;
}

em_status em_bench_buffer_download(em_bench_buffer *buf, size_t bytes) {
    if (!buf->on_device) return NULL;
#if EVALMESH_HAVE_CUDA
    cudaError_t e = cudaMemcpy(buf->host, buf->device, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return cuda_error("cudaMemcpy from the GPU", e);
#endif
    return NULL;
}
