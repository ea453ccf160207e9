/* Writes the header of a safetensors file (8-byte length, JSON padded with spaces to a multiple
 * of 8); the caller then writes the tensors' bytes back to back in the same order. */
#ifndef EVALMESH_MKMODEL_SAFETENSORS_WRITER_H
#define EVALMESH_MKMODEL_SAFETENSORS_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct st_entry {
    const char *name;
    const char *dtype; /* "F32", "F16", "BF16" */
    int n_dims;
    int64_t shape[4]; /* outermost first */
    size_t nbytes;
} st_entry;

bool st_write_header(FILE *f, const st_entry *entries, size_t n);

#endif
