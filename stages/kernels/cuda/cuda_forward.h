/* The `cuda` forward backend, C-callable (the kernels are in the .cu files of this folder).
 *
 * A forward holds this rank's weights on its GPU, uploaded once from the mmapped model: F32, F16
 * and BF16 matrices as they are (F32 products in FP32, the exact mode), the quantized types
 * dequantized to BF16 on the device block by block (dequantize.cuh has a kernel per family:
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), any other type of the type table dequantized on
 * the host through it and converted to BF16 on the device. Projections are cuBLAS GEMMs with FP32
 * accumulation and FP32 results (cublasGemmEx, CUBLAS_COMPUTE_32F: no TF32, no split-K atomics);
 * RMSNorm, RoPE (the CPU path's table, computed on the host in double), causal grouped-query
 * attention with an online softmax (memory bounded: no (T, T) scores), SwiGLU/GeGLU and the
 * vocabulary-tiled head (max, sum of exponentials and argmax per 192-row tile, vocab_head.h:
 * never (T, vocab) logits) are kernels of kernels.cu. The same composition as the CPU
 * (llama_block.h) drives them, so the two compute the same steps.
 *
 * Windows run in batches (score_batch): their positions are the rows of one set of activations,
 * attention stays inside each window (em_cuda_attention's segments), RoPE rows are copied from
 * the table of positions 0.. per window, and the head runs per window with shapes of that window
 * alone. Every reduction of the kernels has a fixed order, so a window's results do not depend
 * on which other windows share its batch, in which order or how often, as long as the GEMMs give
 * a row the same bits whatever the number of rows. Tensor and context parallelism (tp, cp > 1)
 * are not implemented on this backend: create refuses them with exit status 2. */
#ifndef EVALMESH_KERNELS_CUDA_FORWARD_H
#define EVALMESH_KERNELS_CUDA_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "util/error.h"
#include "stages/kernels/forward_backend.h"
#include "stages/model/loaded_model.h"

/* The row of the forward-backend table (forward_backend.h). */
extern const em_forward_backend em_forward_backend_cuda;

/* NULL when this process sees a CUDA device, else an error (exit status 2) carrying
 * cudaGetDeviceCount's message. */
em_status em_cuda_available(void);

/* A forward over a model of configuration c whose weights are generated on the device from seed
 * (BF16 matrices, values uniform in +-1/sqrt(n_in); norms 1), for benchmarks: nothing is read
 * from or written to disk. Windows are scored through em_forward_backend_cuda; `threads` host
 * threads merge the head's tiles. */
em_status em_cuda_forward_new_random(const em_llama_config *c, uint64_t seed, int threads,
                                     void **out);

/* TFLOP/s of a cuBLAS BF16 GEMM (m, n, k), FP32 accumulation, measured over reps products after
 * one warm-up: the practical ceiling a forward's matrix products can reach. */
em_status em_cuda_gemm_tflops(int m, int n, int k, int reps, double *tflops);

/* Bytes of device memory in use now (total - free of cudaMemGetInfo). */
size_t em_cuda_device_used_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
