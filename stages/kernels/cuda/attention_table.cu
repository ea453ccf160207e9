/* The table of the cuda forward's attention kernels (see attention_table.cuh). */
#include "stages/kernels/cuda/attention_table.cuh"

em_cuda_compute em_cuda_compute_of(cudaDataType_t type) {
    return type == CUDA_R_32F ? EM_CUDA_COMPUTE_FP32 : EM_CUDA_COMPUTE_HALF;
}

static bool fp32_supports(const em_cuda_attention_shape *s) {
    return s->head_dim > 0 && s->head_dim <= EM_CUDA_ATTENTION_MAX_HEAD_DIM && s->n_kv_heads > 0 &&
           s->n_heads % s->n_kv_heads == 0;
}

/* The FP32 kernel: one launch for the batch, each row attending within its window (after its
 * kept rows). */
static cudaError_t fp32_run(em_cuda_attention_work *work, const em_cuda_attention_args *a) {
    (void)work;
    const em_cuda_attention_shape *s = &a->shape;
    if (a->kept)
        em_cuda_attention_kept(a->q, a->kept, a->seg, s->n_heads, s->n_kv_heads, s->head_dim,
                               &a->mask, a->att);
    else
        em_cuda_attention(a->q, a->k, a->v, a->seg, s->n_heads, s->n_kv_heads, s->head_dim,
                          &a->mask, a->att);
    return cudaGetLastError();
}

static cudaError_t flash_run(em_cuda_attention_work *work, const em_cuda_attention_args *a) {
    const em_cuda_attention_shape *s = &a->shape;
    if (a->kept)
        return em_cuda_flash_attention_kept(work, a->q, a->kept, a->kept_before, a->kept_slot,
                                            a->seg, s->n_heads, s->n_kv_heads, s->head_dim,
                                            &a->mask, a->att);
    return em_cuda_flash_attention(work, a->q, a->k, a->v, a->seg, s->n_heads, s->n_kv_heads,
                                   s->head_dim, &a->mask, a->att);
}

static const em_cuda_attention_kernel kernels[] = {
    {"flash-bf16 (tensor cores)", EM_CUDA_COMPUTE_HALF, em_flash_supports, flash_run},
    {"fp32 (CUDA cores)", EM_CUDA_COMPUTE_FP32 | EM_CUDA_COMPUTE_HALF, fp32_supports, fp32_run},
};

const em_cuda_attention_kernel *em_cuda_attention_kernel_for(em_cuda_compute mode,
                                                             const em_cuda_attention_shape *shape) {
    for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++)
        if ((kernels[i].modes & mode) && kernels[i].supports(shape)) return &kernels[i];
    return NULL;
}
