/* Device allocations and CUDA failures as evalmesh errors, shared by the cuda forward's files. */
#ifndef EVALMESH_KERNELS_CUDA_DEVICE_MEMORY_CUH
#define EVALMESH_KERNELS_CUDA_DEVICE_MEMORY_CUH

#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "util/error.h"
}

/* "cuda: WHAT: the runtime's message" (exit status EM_EXIT_RUNTIME). */
em_status em_cuda_error(cudaError_t e, const char *what);

/* *p = bytes of device memory (at least 1), counted into *counter when counter is not NULL; an
 * error naming the size when the device has no room. */
em_status em_cuda_alloc(void **p, size_t bytes, size_t *counter);

#endif
