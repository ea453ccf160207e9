/* GGUF reader (v2 and v3). The file is mmapped read-only; the parser walks it with a cursor that
 * checks every read against the file size, so a truncated or hostile file gives one error naming
 * the section and offset. Counts are checked against the bytes left before anything is allocated
 * for them, and tensor sizes are computed with overflow checks.
 *
 * Layout: "GGUF", u32 version, u64 tensor_count, u64 kv_count, kv_count key/values
 * (string key, u32 type, value), tensor_count tensor infos (string name, u32 n_dims,
 * n_dims x u64 dims, u32 type, u64 offset), padding to general.alignment, tensor data. */
#include "stages/formats/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/ggml_types.h"
#include "stages/formats/name_set.h"
#include "util/mapped_file.h"

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_ARRAY_DEPTH 8

/* The public struct plus what only the reader needs. */
typedef struct gguf_file {
    em_gguf g;
    em_mapped_file file; /* the mapping behind map (em_gguf_open); zero when the caller's */
} gguf_file;

/* A cursor over the file image. `where` names the section being read, for errors. */
typedef struct reader {
    const uint8_t *data;
    size_t size;
    size_t pos;
    const char *name;
    char where[96];
} reader;

static em_status truncated(const reader *r, uint64_t need) {
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "%s: truncated in %s (needs %llu bytes at offset %zu, file has %zu)",
                        r->name, r->where, (unsigned long long)need, r->pos, r->size);
}

static size_t remaining(const reader *r) {
    return r->size - r->pos;
}

static em_status read_bytes(reader *r, void *out, size_t n) {
    if (remaining(r) < n) return truncated(r, n);
    memcpy(out, r->data + r->pos, n);
    r->pos += n;
    return NULL;
}

static em_status read_u32(reader *r, uint32_t *out) {
    return read_bytes(r, out, 4); /* GGUF is little-endian, as is every host we build for */
}

static em_status read_u64(reader *r, uint64_t *out) {
    return read_bytes(r, out, 8);
}

static em_status read_string(reader *r, em_gguf_string *out) {
    em_status err = read_u64(r, &out->len);
    if (err) return err;
    if (out->len > remaining(r)) return truncated(r, out->len);
    out->data = (const char *)r->data + r->pos;
    r->pos += out->len;
    return NULL;
}

static char *string_dup(em_gguf_string s) {
    char *c = em_xmalloc(s.len + 1);
    memcpy(c, s.data, s.len);
    c[s.len] = '\0';
    return c;
}

size_t em_gguf_type_size(uint32_t type) {
    switch (type) {
    case EM_GGUF_UINT8:
    case EM_GGUF_INT8:
    case EM_GGUF_BOOL:
        return 1;
    case EM_GGUF_UINT16:
    case EM_GGUF_INT16:
        return 2;
    case EM_GGUF_UINT32:
    case EM_GGUF_INT32:
    case EM_GGUF_FLOAT32:
        return 4;
    case EM_GGUF_UINT64:
    case EM_GGUF_INT64:
    case EM_GGUF_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

static bool known_type(uint32_t type) {
    return type <= EM_GGUF_FLOAT64;
}

/* Decodes one fixed-size scalar at p into v (v->type already set). */
static void decode_scalar(em_gguf_value *v, const uint8_t *p) {
    switch (v->type) {
    case EM_GGUF_UINT8:
        v->u64 = p[0];
        break;
    case EM_GGUF_BOOL:
        v->u64 = p[0] != 0;
        break;
    case EM_GGUF_INT8:
        v->i64 = (int8_t)p[0];
        break;
    case EM_GGUF_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        v->u64 = x;
        break;
    }
    case EM_GGUF_INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        v->i64 = x;
        break;
    }
    case EM_GGUF_UINT32: {
        uint32_t x;
        memcpy(&x, p, 4);
        v->u64 = x;
        break;
    }
    case EM_GGUF_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        v->i64 = x;
        break;
    }
    case EM_GGUF_FLOAT32: {
        float x;
        memcpy(&x, p, 4);
        v->f64 = x;
        break;
    }
    case EM_GGUF_UINT64:
        memcpy(&v->u64, p, 8);
        break;
    case EM_GGUF_INT64:
        memcpy(&v->i64, p, 8);
        break;
    case EM_GGUF_FLOAT64:
        memcpy(&v->f64, p, 8);
        break;
    default:
        break;
    }
}

static void value_free(em_gguf_value *v) {
    if (v->type != EM_GGUF_ARRAY) return;
    free(v->arr.strings);
    if (v->arr.arrays) {
        for (uint64_t i = 0; i < v->arr.count; i++) value_free(&v->arr.arrays[i]);
        free(v->arr.arrays);
    }
}

static em_status read_value(reader *r, em_gguf_type type, int depth, em_gguf_value *v);

static em_status read_array(reader *r, int depth, em_gguf_value *v) {
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: %s: arrays nested deeper than %d levels",
                            r->name, r->where, GGUF_MAX_ARRAY_DEPTH);
    uint32_t elem_type = 0;
    em_status err = read_u32(r, &elem_type);
    if (!err) err = read_u64(r, &v->arr.count);
    if (err) return err;
    if (!known_type(elem_type))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: %s: unknown array element type %u at offset %zu", r->name,
                            r->where, elem_type, r->pos - 12);
    v->arr.elem_type = (em_gguf_type)elem_type;
    /* The smallest encoding of one element: a string is at least its 8-byte length, an array
     * at least its type and count. A count that cannot fit in the bytes left is rejected before
     * anything is allocated for it. */
    size_t elem_min = em_gguf_type_size(elem_type);
    if (elem_type == EM_GGUF_STRING) elem_min = 8;
    if (elem_type == EM_GGUF_ARRAY) elem_min = 12;
    if (v->arr.count > remaining(r) / elem_min) {
        if (em_gguf_type_size(elem_type))
            return truncated(r, v->arr.count * elem_min); /* no overflow: count < 2^64 / 8 */
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: truncated or corrupt %s: an array of %llu %s elements at offset "
                            "%zu cannot fit in the %zu bytes left",
                            r->name, r->where, (unsigned long long)v->arr.count,
                            em_gguf_type_name(v->arr.elem_type), r->pos, remaining(r));
    }
    if (em_gguf_type_size(elem_type)) {
        v->arr.data = r->data + r->pos;
        r->pos += v->arr.count * elem_min;
        return NULL;
    }
    if (elem_type == EM_GGUF_STRING) {
        v->arr.strings = em_xcalloc(v->arr.count, sizeof *v->arr.strings);
        for (uint64_t i = 0; i < v->arr.count; i++) {
            err = read_string(r, &v->arr.strings[i]);
            if (err) return err;
        }
        return NULL;
    }
    v->arr.arrays = em_xcalloc(v->arr.count, sizeof *v->arr.arrays);
    for (uint64_t i = 0; i < v->arr.count; i++) {
        err = read_value(r, EM_GGUF_ARRAY, depth + 1, &v->arr.arrays[i]);
        if (err) return err;
    }
    return NULL;
}

static em_status read_value(reader *r, em_gguf_type type, int depth, em_gguf_value *v) {
    v->type = type;
    if (type == EM_GGUF_STRING) return read_string(r, &v->str);
    if (type == EM_GGUF_ARRAY) return read_array(r, depth, v);
    size_t n = em_gguf_type_size(type);
    if (remaining(r) < n) return truncated(r, n);
    decode_scalar(v, r->data + r->pos);
    r->pos += n;
    return NULL;
}

static em_status read_kvs(reader *r, em_gguf *g, em_name_set *keys) {
    for (uint64_t i = 0; i < g->kv_count; i++) {
        snprintf(r->where, sizeof r->where, "metadata key %llu", (unsigned long long)i);
        size_t start = r->pos;
        em_gguf_string key = {0};
        uint32_t type = 0;
        em_status err = read_string(r, &key);
        if (!err) err = read_u32(r, &type);
        if (err) return err;
        em_gguf_kv *kv = &g->kvs[i];
        kv->key = string_dup(key);
        snprintf(r->where, sizeof r->where, "metadata key %llu (%s)", (unsigned long long)i,
                 kv->key);
        if (!known_type(type))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: metadata key '%s' at offset %zu has unknown value type %u",
                                r->name, kv->key, start, type);
        if (!em_name_set_add(keys, kv->key))
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: duplicate metadata key '%s' at offset %zu",
                                r->name, kv->key, start);
        err = read_value(r, (em_gguf_type)type, 0, &kv->value);
        if (err) return err;
    }
    return NULL;
}

static em_status read_tensor_infos(reader *r, em_gguf *g, em_name_set *names) {
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        snprintf(r->where, sizeof r->where, "tensor info %llu", (unsigned long long)i);
        size_t start = r->pos;
        em_gguf_string name = {0};
        em_gguf_tensor_info *t = &g->tensors[i];
        em_status err = read_string(r, &name);
        if (err) return err;
        t->name = string_dup(name);
        snprintf(r->where, sizeof r->where, "tensor info %llu (%s)", (unsigned long long)i,
                 t->name);
        if (!em_name_set_add(names, t->name))
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: duplicate tensor name '%s' at offset %zu",
                                r->name, t->name, start);
        err = read_u32(r, &t->n_dims);
        if (err) return err;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor '%s' has %u dimensions (1 to %d)",
                                r->name, t->name, t->n_dims, GGUF_MAX_DIMS);
        uint64_t numel = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->shape[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t dim = 0;
            err = read_u64(r, &dim);
            if (err) return err;
            /* INT64_MAX / numel keeps both the dimension and the running product in range. */
            if (dim == 0 || dim > (uint64_t)INT64_MAX / numel)
                return em_error_new(EM_EXIT_BAD_INPUT,
                                    "%s: tensor '%s' has an impossible dimension %u of %llu",
                                    r->name, t->name, d, (unsigned long long)dim);
            t->shape[d] = (int64_t)dim;
            numel *= dim;
        }
        err = read_u32(r, &t->type);
        if (!err) err = read_u64(r, &t->offset);
        if (err) return err;
        const em_ggml_type_info *info = em_ggml_type_info_get(t->type);
        if (!info)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor '%s' has unknown type id %u",
                                r->name, t->name, t->type);
        if (t->shape[0] % info->block_size != 0)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: tensor '%s' of type %s has %lld values per row, not a "
                                "multiple of its block size %d",
                                r->name, t->name, info->name, (long long)t->shape[0],
                                info->block_size);
        uint64_t blocks = numel / (uint64_t)info->block_size;
        if (blocks > SIZE_MAX / info->block_bytes)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor '%s' is impossibly large", r->name,
                                t->name);
        t->nbytes = (size_t)blocks * info->block_bytes;
    }
    return NULL;
}

/* general.alignment: any unsigned integer type, a power of two. */
static em_status read_alignment(em_gguf *g, const char *name) {
    g->alignment = 32;
    const em_gguf_kv *kv = em_gguf_find(g, "general.alignment");
    if (!kv) return NULL;
    em_gguf_type t = kv->value.type;
    bool unsigned_int =
        t == EM_GGUF_UINT8 || t == EM_GGUF_UINT16 || t == EM_GGUF_UINT32 || t == EM_GGUF_UINT64;
    if (!unsigned_int)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: general.alignment has type %s, expected an unsigned integer", name,
                            em_gguf_type_name(t));
    uint64_t a = kv->value.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: general.alignment is %llu, which is not a power of two", name,
                            (unsigned long long)a);
    g->alignment = a;
    return NULL;
}

static int by_offset(const void *a, const void *b) {
    const em_gguf_tensor_info *x = *(const em_gguf_tensor_info *const *)a;
    const em_gguf_tensor_info *y = *(const em_gguf_tensor_info *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* A tensor's size follows from its type and shape; a tensor whose data would run into the next
 * one's (by offset) has a type or shape that disagrees with the bytes the file gave it. */
static em_status check_overlaps(const em_gguf *g, const char *name) {
    const em_gguf_tensor_info **sorted = em_xmalloc(g->tensor_count * sizeof *sorted);
    for (uint64_t i = 0; i < g->tensor_count; i++) sorted[i] = &g->tensors[i];
    qsort(sorted, g->tensor_count, sizeof *sorted, by_offset);
    em_status err = NULL;
    for (uint64_t i = 0; i + 1 < g->tensor_count && !err; i++) {
        const em_gguf_tensor_info *t = sorted[i], *next = sorted[i + 1];
        if (t->offset + t->nbytes <= next->offset) continue;
        char shape[96];
        int len = snprintf(shape, sizeof shape, "{");
        for (uint32_t d = 0; d < t->n_dims; d++)
            len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%lld", d ? ", " : "",
                            (long long)t->shape[d]);
        snprintf(shape + len, sizeof shape - (size_t)len, "}");
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: tensor '%s' of type %s and shape %s needs %zu bytes at data "
                           "offset %llu, but tensor '%s' starts at offset %llu: the type or "
                           "shape disagrees with the tensor's size in the file",
                           name, t->name, em_ggml_type_info_get(t->type)->name, shape, t->nbytes,
                           (unsigned long long)t->offset, next->name,
                           (unsigned long long)next->offset);
    }
    free(sorted);
    return err;
}

static em_status place_tensors(em_gguf *g, reader *r) {
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = r->pos + pad;
    if (g->tensor_count == 0) return NULL; /* vocabulary-only files may end without padding */
    if (g->data_offset > r->size)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: truncated before the tensor data (it starts at offset %llu, file "
                            "has %zu)",
                            r->name, (unsigned long long)g->data_offset, r->size);
    uint64_t data_size = r->size - g->data_offset;
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        em_gguf_tensor_info *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: tensor '%s' data offset %llu is not a multiple of the "
                                "alignment %llu",
                                r->name, t->name, (unsigned long long)t->offset,
                                (unsigned long long)g->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: tensor '%s' data (%zu bytes at data offset %llu) runs past "
                                "the end of the file (%llu bytes of tensor data)",
                                r->name, t->name, t->nbytes, (unsigned long long)t->offset,
                                (unsigned long long)data_size);
        t->data = r->data + g->data_offset + t->offset;
    }
    return check_overlaps(g, r->name);
}

static em_status parse(em_gguf *g, const uint8_t *data, size_t size, const char *name) {
    reader r = {.data = data, .size = size, .name = name};
    snprintf(r.where, sizeof r.where, "header");
    char magic[4];
    em_status err = read_bytes(&r, magic, 4);
    if (err) return err;
    if (memcmp(magic, "GGUF", 4) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: not a GGUF file (wrong magic: the file starts with %02x %02x "
                            "%02x %02x, expected \"GGUF\")",
                            name, (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2],
                            (uint8_t)magic[3]);
    err = read_u32(&r, &g->version);
    if (err) return err;
    if (g->version != 2 && g->version != 3)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: unsupported GGUF version %u (supported: 2, 3)",
                            name, g->version);
    err = read_u64(&r, &g->tensor_count);
    if (!err) err = read_u64(&r, &g->kv_count);
    if (err) return err;
    /* A key/value takes at least 13 bytes (key length, type, a 1-byte value); a tensor info at
     * least 32 (name length, n_dims, one dim, type, offset). */
    if (g->kv_count > remaining(&r) / 13)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: truncated or corrupt: %llu metadata entries cannot fit in a "
                            "file of %zu bytes",
                            name, (unsigned long long)g->kv_count, size);
    if (g->tensor_count > remaining(&r) / 32)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: truncated or corrupt: %llu tensors cannot fit in a file of %zu "
                            "bytes",
                            name, (unsigned long long)g->tensor_count, size);
    g->kvs = em_xcalloc(g->kv_count, sizeof *g->kvs);
    g->tensors = em_xcalloc(g->tensor_count, sizeof *g->tensors);
    em_name_set names;
    em_name_set_init(&names, g->kv_count > g->tensor_count ? g->kv_count : g->tensor_count);
    err = read_kvs(&r, g, &names);
    em_name_set_free(&names);
    if (err) return err;
    err = read_alignment(g, name);
    if (err) return err;
    em_name_set_init(&names, g->tensor_count);
    err = read_tensor_infos(&r, g, &names);
    em_name_set_free(&names);
    if (err) return err;
    return place_tensors(g, &r);
}

em_status em_gguf_parse(const uint8_t *data, size_t size, const char *name, em_gguf **out) {
    *out = NULL;
    gguf_file *f = em_xcalloc(1, sizeof *f);
    f->g.path = em_xstrdup(name);
    f->g.map = data;
    f->g.map_size = size;
    em_status err = parse(&f->g, data, size, f->g.path);
    if (err) {
        em_gguf_close(&f->g);
        return err;
    }
    *out = &f->g;
    return NULL;
}

em_status em_gguf_open(const char *path, em_gguf **out) {
    return em_gguf_open_with(path, false, out);
}

em_status em_gguf_open_with(const char *path, bool in_memory, em_gguf **out) {
    *out = NULL;
    em_mapped_file file;
    em_status err = in_memory ? em_mapped_file_read(path, "a GGUF file", &file)
                              : em_mapped_file_open(path, "a GGUF file", &file);
    if (err) return err;
    gguf_file *f = em_xcalloc(1, sizeof *f);
    f->g.path = em_xstrdup(path);
    f->g.map = file.data;
    f->g.map_size = file.size;
    f->file = file;
    err = parse(&f->g, file.data, file.size, path);
    if (err) {
        em_gguf_close(&f->g);
        return err;
    }
    *out = &f->g;
    return NULL;
}

void em_gguf_close(em_gguf *g) {
    if (!g) return;
    gguf_file *f = (gguf_file *)g;
    if (g->kvs) {
        for (uint64_t i = 0; i < g->kv_count; i++) {
            free(g->kvs[i].key);
            value_free(&g->kvs[i].value);
        }
        free(g->kvs);
    }
    if (g->tensors) {
        for (uint64_t i = 0; i < g->tensor_count; i++) free(g->tensors[i].name);
        free(g->tensors);
    }
    em_mapped_file_close(&f->file);
    free(g->path);
    free(f);
}

const em_gguf_kv *em_gguf_find(const em_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->kv_count; i++)
        if (g->kvs[i].key && strcmp(g->kvs[i].key, key) == 0) return &g->kvs[i];
    return NULL;
}

static em_status wrong_type(const em_gguf *g, const em_gguf_kv *kv, const char *expected) {
    return em_error_new(EM_EXIT_BAD_INPUT, "%s: metadata key '%s' has type %s, expected %s",
                        g->path, kv->key, em_gguf_type_name(kv->value.type), expected);
}

em_status em_gguf_get_u64(const em_gguf *g, const char *key, uint64_t *out, bool *found) {
    const em_gguf_kv *kv = em_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return NULL;
    switch (kv->value.type) {
    case EM_GGUF_UINT8:
    case EM_GGUF_UINT16:
    case EM_GGUF_UINT32:
    case EM_GGUF_UINT64:
        *out = kv->value.u64;
        return NULL;
    case EM_GGUF_INT8:
    case EM_GGUF_INT16:
    case EM_GGUF_INT32:
    case EM_GGUF_INT64:
        if (kv->value.i64 < 0)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: metadata key '%s' is negative (%lld)",
                                g->path, key, (long long)kv->value.i64);
        *out = (uint64_t)kv->value.i64;
        return NULL;
    default:
        return wrong_type(g, kv, "an integer");
    }
}

em_status em_gguf_get_f64(const em_gguf *g, const char *key, double *out, bool *found) {
    const em_gguf_kv *kv = em_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return NULL;
    switch (kv->value.type) {
    case EM_GGUF_FLOAT32:
    case EM_GGUF_FLOAT64:
        *out = kv->value.f64;
        return NULL;
    case EM_GGUF_UINT8:
    case EM_GGUF_UINT16:
    case EM_GGUF_UINT32:
    case EM_GGUF_UINT64:
        *out = (double)kv->value.u64;
        return NULL;
    case EM_GGUF_INT8:
    case EM_GGUF_INT16:
    case EM_GGUF_INT32:
    case EM_GGUF_INT64:
        *out = (double)kv->value.i64;
        return NULL;
    default:
        return wrong_type(g, kv, "a number");
    }
}

em_status em_gguf_get_string(const em_gguf *g, const char *key, em_gguf_string *out, bool *found) {
    const em_gguf_kv *kv = em_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return NULL;
    if (kv->value.type != EM_GGUF_STRING) return wrong_type(g, kv, "a string");
    *out = kv->value.str;
    return NULL;
}

em_status em_gguf_get_bool(const em_gguf *g, const char *key, bool *out, bool *found) {
    const em_gguf_kv *kv = em_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return NULL;
    if (kv->value.type != EM_GGUF_BOOL) return wrong_type(g, kv, "a bool");
    *out = kv->value.u64 != 0;
    return NULL;
}

const char *em_gguf_type_name(em_gguf_type type) {
    static const char *const names[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                        "int32",  "float32", "bool",   "string", "array",
                                        "uint64", "int64",   "float64"};
    if ((unsigned)type < sizeof names / sizeof names[0]) return names[type];
    return "unknown";
}
