/* safetensors files: an 8-byte little-endian header length, a JSON header mapping tensor names
 * to {dtype, shape, data_offsets}, then the tensor bytes. The file is mmapped read-only; every
 * offset is checked (in bounds, no overlap, size equal to the element count times the element
 * size). Only F32, F16 and BF16 tensors are accepted; `__metadata__` is ignored. */
#ifndef EVALMESH_SAFETENSORS_H
#define EVALMESH_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/formats/ggml_types.h"
#include "util/mapped_file.h"

typedef struct em_st_tensor {
    char *name;
    em_tensor_type type;
    int n_dims;
    int64_t shape[4]; /* as the file writes it: outermost first ({rows, cols} for a matrix) */
    const void *data;
    size_t nbytes;
} em_st_tensor;

typedef struct em_safetensors {
    char *path;
    const uint8_t *map;
    size_t map_size;
    em_mapped_file file; /* the mapping behind map (em_safetensors_open); zero when the caller's */
    size_t header_bytes; /* 8 + the JSON length: where the tensor data starts */
    em_st_tensor *tensors;
    size_t count;
} em_safetensors;

em_status em_safetensors_open(const char *path, em_safetensors **out);
/* em_safetensors_open, with the file's bytes read into memory of their own instead of mapped
 * when in_memory (em_mapped_file_read). */
em_status em_safetensors_open_with(const char *path, bool in_memory, em_safetensors **out);
/* Parses an in-memory image (used by the fuzz target); the buffer must outlive the result. */
em_status em_safetensors_parse(const uint8_t *data, size_t size, const char *name,
                               em_safetensors **out);
void em_safetensors_close(em_safetensors *st);

#endif
