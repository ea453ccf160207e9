/* The `cuda` forward backend, C-callable (the kernels are in the .cu files of this folder).
 *
 * A forward holds this rank's weights on its GPU, uploaded once from the mmapped model as the
 * forward's options say (device_weights.cuh): F16 and BF16 matrices as they are, F32 ones as they
 * are (products in FP32, the exact mode) or rounded to BF16; the quantized types with a device
 * decoder (dequantize.cuh: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and the torchao int8 and
 * int4 weight-only types) dequantized to BF16 once at load, or kept in their blocks and
 * dequantized into a BF16 scratch before each product; any other type of the type table
 * dequantized on the host through it and converted to BF16 on the device. Projections are cuBLAS
 * GEMMs with FP32 accumulation and FP32 results (cublasGemmEx, CUBLAS_COMPUTE_32F: no TF32, no
 * split-K atomics); RMSNorm, RoPE (the CPU path's table, computed on the host in double), causal
 * grouped-query attention with an online softmax (memory bounded: no (T, T) scores), SwiGLU/GeGLU
 * and the vocabulary-tiled head (max, sum of exponentials and argmax per 192-row tile,
 * vocab_head.h: never (T, vocab) logits) are kernels of kernels.cu. The same composition as the CPU
 * (llama_block.h) drives them, so the two compute the same steps.
 *
 * Windows are computed one at a time on the device, each with kernel shapes that depend only on
 * its own length: a window's results do not depend on which other windows run, in which order or
 * how often (every reduction has a fixed order). Tensor and context parallelism (tp, cp > 1) are
 * not implemented on this backend: create refuses them with exit status 2. */
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
 * (matrices of values in about +-1/sqrt(n_in); norms 1), for benchmarks: nothing is read from or
 * written to disk. The embedding and output are BF16; the layers' matrices are of layer_type:
 * BF16, or Q4_0 or TORCHAO_I4_G128 blocks kept quantized and dequantized before each product
 * (device_weights.cuh). Windows are scored through em_forward_backend_cuda; `threads` host
 * threads merge the head's tiles. */
em_status em_cuda_forward_new_random(const em_llama_config *c, uint64_t seed, uint32_t layer_type,
                                     int threads, void **out);

/* TFLOP/s of a cuBLAS BF16 GEMM (m, n, k), FP32 accumulation, measured over reps products after
 * one warm-up: the practical ceiling a forward's matrix products can reach. */
em_status em_cuda_gemm_tflops(int m, int n, int k, int reps, double *tflops);

/* Bytes of device memory in use now (total - free of cudaMemGetInfo). */
size_t em_cuda_device_used_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
