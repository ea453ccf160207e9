/* GGUF writer (see gguf_writer.h). Alignment is GGUF's default of 32 bytes. */
#include "stages/formats/gguf_writer.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define ALIGNMENT 32

typedef struct bytes {
    uint8_t *data;
    size_t len, cap;
} bytes;

struct gguf_writer {
    uint32_t version;
    bytes kvs;
    uint64_t kv_count;
    bytes infos;
    uint64_t tensor_count;
    uint64_t next_offset; /* data offset of the next declared tensor */
};

static void put(bytes *b, const void *data, size_t n) {
    if (n == 0) return;
    if (b->len + n > b->cap) {
        b->cap = 2 * (b->len + n) + 256;
        b->data = em_xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void put_u32(bytes *b, uint32_t v) {
    put(b, &v, 4);
}

static void put_u64(bytes *b, uint64_t v) {
    put(b, &v, 8);
}

static void put_str(bytes *b, const char *s, size_t len) {
    put_u64(b, len);
    put(b, s, len);
}

static void put_key(gguf_writer *w, const char *key, em_gguf_type type) {
    put_str(&w->kvs, key, strlen(key));
    put_u32(&w->kvs, type);
    w->kv_count++;
}

gguf_writer *gguf_writer_new(uint32_t version) {
    gguf_writer *w = em_xcalloc(1, sizeof *w);
    w->version = version;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    free(w->kvs.data);
    free(w->infos.data);
    free(w);
}

void gguf_kv_string(gguf_writer *w, const char *key, const char *value) {
    put_key(w, key, EM_GGUF_STRING);
    put_str(&w->kvs, value, strlen(value));
}

void gguf_kv_u32(gguf_writer *w, const char *key, uint32_t value) {
    put_key(w, key, EM_GGUF_UINT32);
    put_u32(&w->kvs, value);
}

void gguf_kv_f32(gguf_writer *w, const char *key, float value) {
    put_key(w, key, EM_GGUF_FLOAT32);
    put(&w->kvs, &value, 4);
}

void gguf_kv_bool(gguf_writer *w, const char *key, bool value) {
    put_key(w, key, EM_GGUF_BOOL);
    uint8_t b = value;
    put(&w->kvs, &b, 1);
}

void gguf_kv_string_array(gguf_writer *w, const char *key, const char *const *values, size_t n) {
    put_key(w, key, EM_GGUF_ARRAY);
    put_u32(&w->kvs, EM_GGUF_STRING);
    put_u64(&w->kvs, n);
    for (size_t i = 0; i < n; i++) put_str(&w->kvs, values[i], strlen(values[i]));
}

void gguf_kv_i32_array(gguf_writer *w, const char *key, const int32_t *values, size_t n) {
    put_key(w, key, EM_GGUF_ARRAY);
    put_u32(&w->kvs, EM_GGUF_INT32);
    put_u64(&w->kvs, n);
    put(&w->kvs, values, 4 * n);
}

void gguf_kv_f32_array(gguf_writer *w, const char *key, const float *values, size_t n) {
    put_key(w, key, EM_GGUF_ARRAY);
    put_u32(&w->kvs, EM_GGUF_FLOAT32);
    put_u64(&w->kvs, n);
    put(&w->kvs, values, 4 * n);
}

/* Re-encodes a parsed value (its scalar fields were decoded; arrays keep their raw data). */
static void put_value(bytes *b, const em_gguf_value *v) {
    if (v->type == EM_GGUF_STRING) {
        put_str(b, v->str.data, v->str.len);
    } else if (v->type == EM_GGUF_ARRAY) {
        put_u32(b, v->arr.elem_type);
        put_u64(b, v->arr.count);
        if (v->arr.elem_type == EM_GGUF_STRING) {
            for (uint64_t i = 0; i < v->arr.count; i++)
                put_str(b, v->arr.strings[i].data, v->arr.strings[i].len);
        } else if (v->arr.elem_type == EM_GGUF_ARRAY) {
            for (uint64_t i = 0; i < v->arr.count; i++) put_value(b, &v->arr.arrays[i]);
        } else {
            put(b, v->arr.data, v->arr.count * em_gguf_type_size(v->arr.elem_type));
        }
    } else if (v->type == EM_GGUF_FLOAT32) {
        float f = (float)v->f64;
        put(b, &f, 4);
    } else {
        /* integers and bools: the low bytes of the 64-bit field (little-endian) */
        put(b, &v->u64, em_gguf_type_size(v->type));
    }
}

void gguf_kv_copy(gguf_writer *w, const em_gguf_kv *kv) {
    put_key(w, kv->key, kv->value.type);
    put_value(&w->kvs, &kv->value);
}

void gguf_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims,
                     const int64_t *shape, size_t nbytes) {
    put_str(&w->infos, name, strlen(name));
    put_u32(&w->infos, (uint32_t)n_dims);
    for (int d = 0; d < n_dims; d++) put_u64(&w->infos, (uint64_t)shape[d]);
    put_u32(&w->infos, type);
    put_u64(&w->infos, w->next_offset);
    w->next_offset += (nbytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    w->tensor_count++;
}

bool gguf_write_padding(FILE *f, uint64_t written) {
    static const uint8_t zeros[ALIGNMENT];
    size_t pad = (size_t)((ALIGNMENT - written % ALIGNMENT) % ALIGNMENT);
    return fwrite(zeros, 1, pad, f) == pad;
}

static bool write_bytes(FILE *f, const bytes *b) {
    return b->len == 0 || fwrite(b->data, 1, b->len, f) == b->len;
}

bool gguf_write_header(gguf_writer *w, FILE *f) {
    bytes head = {0};
    put(&head, "GGUF", 4);
    put_u32(&head, w->version);
    put_u64(&head, w->tensor_count);
    put_u64(&head, w->kv_count);
    bool ok = write_bytes(f, &head) && write_bytes(f, &w->kvs) && write_bytes(f, &w->infos) &&
              gguf_write_padding(f, head.len + w->kvs.len + w->infos.len);
    free(head.data);
    return ok;
}
