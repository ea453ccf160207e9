/* The nccl backend, with or without a launcher. Where CUDA devices are visible: an all-reduce,
 * all-gather and split on GPU buffers, and an all-reduce and all-gather on host buffers (staged),
 * give exact integer results. Where none is (this kind of machine): a clear error, exit status 4,
 * naming the rank and CUDA's reason, on every rank and without hanging. In a build without CUDA:
 * exit status 2 saying so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_info.h"
#include "runner/comm/backend_nccl.h"
#include "runner/comm/bootstrap.h"
#include "test.h"

#if EVALMESH_HAVE_CUDA
#include <cuda_runtime.h>

/* Sums (rank + 1) * (i + 1) over the world on the GPU. */
static void check_on_gpu(em_comm *c) {
    enum { N = 4 };
    int64_t host[N], *dev = NULL;
    for (int i = 0; i < N; i++) host[i] = (int64_t)(c->rank + 1) * (i + 1);
    CHECK(cudaMalloc((void **)&dev, sizeof host) == cudaSuccess);
    cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice);
    CHECK(em_allreduce(c, dev, dev, N, EM_DTYPE_INT64, EM_OP_SUM) == NULL);
    cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N; i++)
        CHECK_INT_EQ(host[i], (int64_t)c->size * (c->size + 1) / 2 * (i + 1));
    em_comm *half = NULL;
    CHECK(em_comm_split(c, c->rank % 2, c->rank, &half) == NULL);
    if (half) {
        CHECK_INT_EQ(half->size, (c->size + 1 - c->rank % 2) / 2);
        CHECK(em_barrier(half) == NULL);
        em_comm_destroy(half);
    }
    cudaFree(dev);
    /* host buffers go through the staging buffer: an in-place integer sum and a gather */
    int64_t sums[3] = {c->rank + 1, -(int64_t)(c->rank + 1) << 40, 7};
    CHECK(em_allreduce(c, sums, sums, 3, EM_DTYPE_INT64, EM_OP_SUM) == NULL);
    CHECK_INT_EQ(sums[0], (int64_t)c->size * (c->size + 1) / 2);
    CHECK_INT_EQ(sums[1], -((int64_t)c->size * (c->size + 1) / 2) * ((int64_t)1 << 40));
    CHECK_INT_EQ(sums[2], 7 * (int64_t)c->size);
    int32_t mine = 100 + c->rank, *all = calloc((size_t)c->size, sizeof *all);
    CHECK(em_allgather(c, &mine, all, sizeof mine) == NULL);
    for (int r = 0; r < c->size; r++) CHECK_INT_EQ(all[r], 100 + r);
    free(all);
}
#endif

int main(void) {
    em_bootstrap boot;
    em_status err = em_bootstrap_init(30, &boot);
    if (err) {
        fprintf(stderr, "bootstrap: %s\n", err->message);
        return 1;
    }
    em_comm *c = NULL;
    err = em_comm_nccl_world(boot.world, boot.local_rank, 10, &c);
#if EVALMESH_HAVE_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
        CHECK(err == NULL);
        if (c) check_on_gpu(c);
    } else {
        CHECK(err && err->exit_code == EM_EXIT_RUNTIME);
        char want[128];
        snprintf(
            want, sizeof want,
            "nccl backend: no CUDA device visible on rank %d (cudaGetDeviceCount: ", boot.rank);
        if (err) CHECK(strncmp(err->message, want, strlen(want)) == 0);
        if (err) printf("rank %d: expected error: %s\n", boot.rank, err->message);
    }
#else
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err)
        CHECK_STR_EQ(err->message, "nccl backend: this evalmesh was built without CUDA and NCCL "
                                   "(its backends: local mpi)");
#endif
    em_error_free(err);
    em_comm_destroy(c);
    em_bootstrap_finalize(&boot);
    return test_finish();
}
