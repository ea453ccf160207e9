/* GGUF (llama.cpp's model format, v2 and v3): header, metadata key/values of every type (nested
 * arrays too), tensor infos, alignment, tensor data mmapped. Every count, length and offset is
 * checked against the file size before use, so a truncated or hostile file is an error, never a
 * crash or a huge allocation. */
#ifndef EVALMESH_GGUF_H
#define EVALMESH_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef enum em_gguf_type {
    EM_GGUF_UINT8 = 0,
    EM_GGUF_INT8 = 1,
    EM_GGUF_UINT16 = 2,
    EM_GGUF_INT16 = 3,
    EM_GGUF_UINT32 = 4,
    EM_GGUF_INT32 = 5,
    EM_GGUF_FLOAT32 = 6,
    EM_GGUF_BOOL = 7,
    EM_GGUF_STRING = 8,
    EM_GGUF_ARRAY = 9,
    EM_GGUF_UINT64 = 10,
    EM_GGUF_INT64 = 11,
    EM_GGUF_FLOAT64 = 12,
} em_gguf_type;

typedef struct em_gguf_string {
    uint64_t len;
    const char *data; /* into the mapping: not NUL-terminated */
} em_gguf_string;

typedef struct em_gguf_value em_gguf_value;
struct em_gguf_value {
    em_gguf_type type;
    union {
        uint64_t u64; /* every unsigned integer type and bool */
        int64_t i64;  /* every signed integer type */
        double f64;   /* FLOAT32 and FLOAT64 */
        em_gguf_string str;
        struct {
            em_gguf_type elem_type;
            uint64_t count;
            const void *data; /* fixed-size elements: raw little-endian data in the mapping */
            em_gguf_string *strings; /* STRING elements (count entries) */
            em_gguf_value *arrays;   /* ARRAY elements (count entries) */
        } arr;
    };
};

typedef struct em_gguf_kv {
    char *key;
    em_gguf_value value;
} em_gguf_kv;

typedef struct em_gguf_tensor_info {
    char *name;
    uint32_t n_dims;
    int64_t shape[4];
    uint32_t type;   /* as the file says: an em_tensor_type (ggml_types.h) when the table has it */
    uint64_t offset; /* from the start of the tensor data section */
    size_t nbytes;
    const void *data;
} em_gguf_tensor_info;

typedef struct em_gguf {
    char *path;
    uint32_t version;
    em_gguf_kv *kvs;
    uint64_t kv_count;
    em_gguf_tensor_info *tensors;
    uint64_t tensor_count;
    uint64_t alignment;
    uint64_t data_offset; /* where tensor data starts in the file */
    const uint8_t *map;
    size_t map_size;
} em_gguf;

em_status em_gguf_open(const char *path, em_gguf **out);
/* em_gguf_open, with the file's bytes read into memory of their own instead of mapped when
 * in_memory (em_mapped_file_read). */
em_status em_gguf_open_with(const char *path, bool in_memory, em_gguf **out);
/* Parses an in-memory image (used by the fuzz target); the buffer must outlive the result. */
em_status em_gguf_parse(const uint8_t *data, size_t size, const char *name, em_gguf **out);
void em_gguf_close(em_gguf *g);

const em_gguf_kv *em_gguf_find(const em_gguf *g, const char *key);
/* Typed lookups: false when the key is absent; an error (exit 2) when it has another type. */
em_status em_gguf_get_u64(const em_gguf *g, const char *key, uint64_t *out, bool *found);
em_status em_gguf_get_f64(const em_gguf *g, const char *key, double *out, bool *found);
em_status em_gguf_get_string(const em_gguf *g, const char *key, em_gguf_string *out, bool *found);
em_status em_gguf_get_bool(const em_gguf *g, const char *key, bool *out, bool *found);
const char *em_gguf_type_name(em_gguf_type type);
/* Bytes of one value of a fixed-size type; 0 for STRING, ARRAY and unknown types. */
size_t em_gguf_type_size(uint32_t type);

#endif
