/* The tensor-parallel sum of row-parallel products on the device: the tp ranks' partial sums
 * (each (T, D), gathered in rank order) added as the composition defines it (llama_block.h) and
 * the CPU backend does: sum = all[0] + all[1] + ... in rank order, then x += sum, so every rank
 * of a tp group gets the same bits. */
#ifndef EVALMESH_KERNELS_CUDA_PARTIAL_SUMS_CUH
#define EVALMESH_KERNELS_CUDA_PARTIAL_SUMS_CUH

#include <stdint.h>

/* out (n) += all[0] + ... + all[parts-1] (accumulate), or out = that sum; all is (parts, n), device
 * memory. */
void em_cuda_sum_partials(float *out, const float *all, int parts, int64_t n, bool accumulate);

#endif
