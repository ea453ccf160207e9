/* A whole file mapped read-only into memory, for the model readers (GGUF, safetensors). Only a
 * regular file is mapped: a FIFO, directory or device gets one error naming the path and what it
 * is (exit status 2, worded as regular_file.h's), without blocking on it first. A file can instead
 * be read into memory of its own in 2 MiB pages (llama.cpp's --no-mmap), which a stream over the
 * weights reads faster: on an Intel Xeon VM, 11.2 GB/s per thread over 4 KiB pages of the page
 * cache against 19.5 GB/s over transparent huge pages. */
#ifndef EVALMESH_MAPPED_FILE_H
#define EVALMESH_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct em_mapped_file {
    const uint8_t *data; /* size bytes; a valid empty buffer for an empty file */
    size_t size;
    void *mapping;       /* what to munmap, NULL when nothing was mapped */
    size_t mapped_bytes; /* of mapping */
} em_mapped_file;

/* Maps `path`; `what` names what it must be, for errors ("a GGUF file"); *out is untouched on
 * error. */
em_status em_mapped_file_open(const char *path, const char *what, em_mapped_file *out);
/* em_mapped_file_open's checks, then the file's bytes read into anonymous read-only memory, 2 MiB
 * aligned and advised as transparent huge pages (the kernel grants them where THP is `madvise` or
 * `always`): this process's own copy, not the page cache that processes mapping the same file
 * share. Errors: as em_mapped_file_open's, and out of memory (exit status 4). */
em_status em_mapped_file_read(const char *path, const char *what, em_mapped_file *out);
/* Unmaps; a zeroed em_mapped_file (or one already closed) is fine. */
void em_mapped_file_close(em_mapped_file *file);

#endif
