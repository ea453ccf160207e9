/* The attention kernels of the cuda forward, one row per kernel (attention_table.cu): its name,
 * the compute modes it serves and which shapes it runs. em_cuda_attention_kernel_for picks the
 * first row, in table order, that serves a mode and runs a shape: BF16/F16-weight forwards get
 * the tensor-core kernel (attention_flash.cuh) where it runs the shape, and the FP32 kernel
 * (kernels.cuh's em_cuda_attention) otherwise; FP32-weight forwards, the exact mode, always get
 * the FP32 kernel. */
#ifndef EVALMESH_KERNELS_CUDA_ATTENTION_TABLE_CUH
#define EVALMESH_KERNELS_CUDA_ATTENTION_TABLE_CUH

#include <cuda_runtime.h>
#include <library_types.h>

#include "stages/kernels/cuda/attention_flash.cuh"
#include "stages/kernels/cuda/kernels.cuh"

/* How a forward computes, from its weights' type: FP32 throughout (the exact mode) or with
 * BF16/F16 tensor-core inputs. Bits, so a row can serve both. */
typedef enum em_cuda_compute {
    EM_CUDA_COMPUTE_FP32 = 1,
    EM_CUDA_COMPUTE_HALF = 2,
} em_cuda_compute;

/* The mode of a forward whose projection weights are of `type` (CUDA_R_32F, _16F or _16BF). */
em_cuda_compute em_cuda_compute_of(cudaDataType_t type);

/* One attention call: att (T, H*hd) from q (T, H*hd), k, v (T, KV*hd) for the windows of seg;
 * or, with kept, each window after its kept rows, whose keys are all in its slot (k and v not
 * read; kept_before and kept_slot: kept's before and slot on the host). */
typedef struct em_cuda_attention_args {
    const float *q, *k, *v;
    const em_cuda_segments *seg;
    em_cuda_attention_shape shape;
    em_cuda_mask mask;
    float *att;
    const em_cuda_kept *kept;
    const int32_t *kept_before, *kept_slot;
} em_cuda_attention_args;

typedef struct em_cuda_attention_kernel {
    const char *name;
    unsigned modes; /* em_cuda_compute bits it serves */
    bool (*supports)(const em_cuda_attention_shape *shape);
    /* launches on stream 0; the launch's failure or cudaSuccess */
    cudaError_t (*run)(em_cuda_attention_work *work, const em_cuda_attention_args *a);
} em_cuda_attention_kernel;

/* The kernel for a mode and shape, NULL when none runs it. */
const em_cuda_attention_kernel *em_cuda_attention_kernel_for(em_cuda_compute mode,
                                                             const em_cuda_attention_shape *shape);

#endif
