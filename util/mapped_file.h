/* A whole file mapped read-only into memory, for the model readers (GGUF, safetensors). Only a
 * regular file is mapped: a FIFO, directory or device gets one error naming the path and what it
 * is (exit status 2, worded as regular_file.h's), without blocking on it first. */
#ifndef EVALMESH_MAPPED_FILE_H
#define EVALMESH_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct em_mapped_file {
    const uint8_t *data; /* size bytes; a valid empty buffer for an empty file */
    size_t size;
    void *mapping; /* what to munmap, NULL when nothing was mapped */
} em_mapped_file;

/* Maps `path`; `what` names what it must be, for errors ("a GGUF file"); *out is untouched on
 * error. */
em_status em_mapped_file_open(const char *path, const char *what, em_mapped_file *out);
/* Unmaps; a zeroed em_mapped_file (or one already closed) is fine. */
void em_mapped_file_close(em_mapped_file *file);

#endif
