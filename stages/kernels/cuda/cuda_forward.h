/* The `cuda` forward backend, C-callable (the kernels are in the .cu files of this folder).
 *
 * A forward holds this rank's weights on its GPU, uploaded once from the mmapped model as the
 * forward's options say (device_weights.cuh): F16 and BF16 matrices as they are, F32 ones as they
 * are (products in FP32, the exact mode) or rounded to BF16; the quantized types with a device
 * decoder (dequantize.cuh: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and the torchao int8 and
 * int4 weight-only types) dequantized to BF16 once at load, or kept in their blocks and
 * dequantized into a BF16 scratch before each product; any other type of the type table
 * dequantized on the host through it and converted to BF16 on the device. Projections and the
 * head's logits are cuBLASLt products with FP32 accumulation and FP32 results (gemm.cuh:
 * CUBLAS_COMPUTE_32F, no TF32, split-K off, one fixed algorithm per shape whatever T). Causal
 * grouped-query attention with an online softmax (memory bounded: no (T, T) scores) is a row of
 * attention_table.cuh: on tensor cores (attention_flash.cuh) for BF16/F16 weights, in FP32 for
 * the exact mode. RMSNorm, RoPE (the CPU path's table, computed on the host in double),
 * SwiGLU/GeGLU and the vocabulary-tiled head (max, sum of exponentials and argmax per 192-row
 * tile, vocab_head.h: never (T, vocab) logits) are kernels of kernels.cu. The same composition as
 * the CPU (llama_block.h) drives them, so the two compute the same steps.
 *
 * Windows run in batches (score_batch): their positions are the rows of one set of activations,
 * attention stays inside each window (the attention kernels' segments), RoPE rows are copied from
 * the table of positions 0.. per window, and the head runs per window with shapes of that window
 * alone. Every reduction of the kernels has a fixed order and the GEMMs give a row the same bits
 * whatever the number of rows (gemm.cuh's probe), so a window's results do not depend on which
 * other windows share its batch, in which order or how often.
 *
 * Tensor and context parallelism run the composition's split (llama_block.h) on the device: each
 * rank uploads only its tp share (llama_shard.h, the cpu backend's split: its heads, KV heads,
 * MLP columns and vocabulary tiles; the token embedding whole), so weight memory falls as 1/tp;
 * a tp that does not fit the model is refused by create before any device is touched. Row-parallel
 * products are summed in rank order by a kernel (partial_sums.cuh) and cp ranks attend block by
 * block around the ring with an online softmax (attention_block.cuh). What crosses the groups is
 * staged through pinned host buffers, so a mesh of backend mpi or nccl carries it. Each rank
 * takes the device of its local rank modulo the devices it sees: ranks beyond the GPU count share
 * one (separate contexts; not in exclusive-process mode), so tp = 2 runs on one GPU under mpi
 * (NCCL refuses two ranks of a communicator on one device).
 *
 * Greedy decoding (the seam's decode_new, prefill and step; cp = 1) keeps each sequence's keys and
 * values in a device cache (decode_cache.cuh): a batch of sequences runs as windows whose RoPE rows
 * are their positions after the kept rows, attention writes each window's own rows after its
 * slot's and reads all its keys from there (both kernels of attention_table.cuh, with the
 * arithmetic of the whole sequence per query), and the head gives each window's last argmax and,
 * when asked, its logits. decode_new refuses a forward whose products are not row-invariant (a
 * step's one row per sequence would not be the full forward's bits). */
#ifndef EVALMESH_KERNELS_CUDA_FORWARD_H
#define EVALMESH_KERNELS_CUDA_FORWARD_H

#include <stdbool.h>
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

/* TFLOP/s of a BF16 GEMM out (n, m) = in (n, k) w (m, k)^T with FP32 accumulation through the
 * forward's own cuBLASLt path (gemm.cuh: one fixed algorithm, split-K off), measured over reps
 * products after one warm-up: the practical ceiling a forward's matrix products can reach. algo
 * (algo_size bytes) gets the plan's algorithm: id, tile, stages, ..., and its row invariance. */
em_status em_cuda_gemm_tflops(int m, int n, int k, int reps, double *tflops, char *algo,
                              size_t algo_size);

/* Whether every matrix product of this cuda forward keeps a position's results bit-identical
 * whatever the other positions of the product (its T, its offset among them), as scoring many
 * windows per launch needs; makes the plans of all its products now. When not, reason (size
 * bytes, may be NULL) says which product and why: batching then scores one window per launch. */
bool em_cuda_gemm_row_invariant(void *forward, char *reason, size_t size);

/* Bytes of device memory in use now (total - free of cudaMemGetInfo). */
size_t em_cuda_device_used_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
