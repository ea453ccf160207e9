/* Buffers for the communication benchmarks: host memory for the mpi backend, GPU memory for the
 * nccl backend (CUDA runtime; only in builds with CUDA). The benchmark fills and checks host
 * copies and moves them with upload/download, so the same code measures both backends. */
#ifndef EVALMESH_BENCH_BUFFERS_H
#define EVALMESH_BENCH_BUFFERS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

typedef struct em_bench_buffer {
    void *host;   /* always present */
    void *device; /* GPU copy, or == host when on_device is false */
    size_t bytes;
    bool on_device;
} em_bench_buffer;

/* Allocates bytes of host memory, and of GPU memory on the current device when on_device. */
em_status em_bench_buffer_alloc(em_bench_buffer *buf, size_t bytes, bool on_device);
void em_bench_buffer_free(em_bench_buffer *buf);
/* Copies the first bytes host -> device (upload) or device -> host (download); no-ops on host. */
em_status em_bench_buffer_upload(em_bench_buffer *buf, size_t bytes);
em_status em_bench_buffer_download(em_bench_buffer *buf, size_t bytes);

#endif
