/* safetensors reader (see safetensors.h). */
#include "stages/formats/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/formats/name_set.h"

/* A JSON number that is a non-negative integer exactly representable in a double. */
static bool json_count(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return false;
    double v = item->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v) return false;
    *out = (uint64_t)v;
    return true;
}

static em_status parse_dtype(const char *path, const char *name, const cJSON *dtype,
                             em_tensor_type *type, size_t *elem_bytes) {
    if (!cJSON_IsString(dtype))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor %s has no string \"dtype\"", path, name);
    const char *d = dtype->valuestring;
    if (strcmp(d, "F32") == 0) {
        *type = EM_TENSOR_F32;
        *elem_bytes = 4;
    } else if (strcmp(d, "F16") == 0) {
        *type = EM_TENSOR_F16;
        *elem_bytes = 2;
    } else if (strcmp(d, "BF16") == 0) {
        *type = EM_TENSOR_BF16;
        *elem_bytes = 2;
    } else {
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: tensor %s has dtype %.32s; supported: F32, "
                            "F16, BF16",
                            path, name, d);
    }
    return NULL;
}

static em_status parse_tensor(em_safetensors *st, const cJSON *item, size_t data_size,
                              uint64_t offsets[2], em_st_tensor *t) {
    const char *path = st->path, *name = item->string;
    t->name = em_xstrdup(name);
    if (!cJSON_IsObject(item))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor %s is not a JSON object", path, name);
    size_t elem_bytes = 1;
    em_status err = parse_dtype(path, name, cJSON_GetObjectItemCaseSensitive(item, "dtype"),
                                &t->type, &elem_bytes);
    if (err) return err;
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    int n_dims = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (n_dims < 0 || n_dims > 4)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: tensor %s needs a \"shape\" list of at most 4 dimensions", path,
                            name);
    t->n_dims = n_dims;
    uint64_t numel = 1;
    for (int d = 0; d < 4; d++) t->shape[d] = 1;
    for (int d = 0; d < n_dims; d++) {
        uint64_t dim;
        if (!json_count(cJSON_GetArrayItem(shape, d), &dim))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: tensor %s: shape entry %d is not a non-negative integer", path,
                                name, d);
        if (dim != 0 && numel > (uint64_t)INT64_MAX / dim)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor %s has an impossibly large shape",
                                path, name);
        t->shape[d] = (int64_t)dim;
        numel *= dim;
    }
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !json_count(cJSON_GetArrayItem(offs, 0), &offsets[0]) ||
        !json_count(cJSON_GetArrayItem(offs, 1), &offsets[1]))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: tensor %s needs \"data_offsets\": [begin, end] (non-negative "
                            "integers)",
                            path, name);
    if (offsets[0] > offsets[1] || offsets[1] > data_size)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: tensor %s data_offsets [%llu, %llu] are outside the %zu bytes "
                            "of tensor data",
                            path, name, (unsigned long long)offsets[0],
                            (unsigned long long)offsets[1], data_size);
    uint64_t nbytes = offsets[1] - offsets[0];
    if (numel > nbytes / elem_bytes || numel * elem_bytes != nbytes)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: tensor %s has %llu bytes but its shape and dtype need %llu x %zu",
                            path, name, (unsigned long long)nbytes, (unsigned long long)numel,
                            elem_bytes);
    t->data = st->map + st->header_bytes + offsets[0];
    t->nbytes = (size_t)nbytes;
    return NULL;
}

typedef struct span {
    uint64_t begin, end;
    size_t index;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

static em_status parse_header(em_safetensors *st, const cJSON *root, size_t data_size) {
    if (!cJSON_IsObject(root))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: the header is not a JSON object", st->path);
    size_t n = 0;
    for (const cJSON *it = root->child; it; it = it->next)
        if (strcmp(it->string, "__metadata__") != 0) n++;
    st->tensors = em_xcalloc(n, sizeof *st->tensors);
    span *spans = em_xcalloc(n, sizeof *spans);
    em_name_set names;
    em_name_set_init(&names, n);
    em_status err = NULL;
    for (const cJSON *it = root->child; it && !err; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        if (!em_name_set_add(&names, it->string)) {
            err = em_error_new(EM_EXIT_BAD_INPUT, "%s: duplicate tensor name %s", st->path,
                               it->string);
            break;
        }
        uint64_t offsets[2] = {0, 0};
        err = parse_tensor(st, it, data_size, offsets, &st->tensors[st->count]);
        spans[st->count] = (span){offsets[0], offsets[1], st->count};
        st->count++;
    }
    em_name_set_free(&names);
    if (!err) {
        qsort(spans, st->count, sizeof *spans, span_cmp);
        for (size_t i = 1; i < st->count && !err; i++)
            if (spans[i].begin < spans[i - 1].end)
                err = em_error_new(
                    EM_EXIT_BAD_INPUT, "%s: tensors %s [%llu, %llu] and %s [%llu, %llu] overlap",
                    st->path, st->tensors[spans[i - 1].index].name,
                    (unsigned long long)spans[i - 1].begin, (unsigned long long)spans[i - 1].end,
                    st->tensors[spans[i].index].name, (unsigned long long)spans[i].begin,
                    (unsigned long long)spans[i].end);
    }
    free(spans);
    return err;
}

static em_status parse(em_safetensors *st) {
    if (st->map_size < 8)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: truncated in the header length (needs 8 bytes at offset 0, file "
                            "has %zu)",
                            st->path, st->map_size);
    uint64_t len;
    memcpy(&len, st->map, 8);
    if (len > st->map_size - 8)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: truncated in the JSON header (needs %llu bytes at offset 8, file "
                            "has %zu)",
                            st->path, (unsigned long long)len, st->map_size);
    st->header_bytes = 8 + (size_t)len;
    cJSON *root = cJSON_ParseWithLength((const char *)st->map + 8, (size_t)len);
    if (!root) return em_error_new(EM_EXIT_BAD_INPUT, "%s: the header is not valid JSON", st->path);
    em_status err = parse_header(st, root, st->map_size - st->header_bytes);
    cJSON_Delete(root);
    return err;
}

em_status em_safetensors_parse(const uint8_t *data, size_t size, const char *name,
                               em_safetensors **out) {
    *out = NULL;
    em_safetensors *st = em_xcalloc(1, sizeof *st);
    st->path = em_xstrdup(name);
    st->map = data;
    st->map_size = size;
    em_status err = parse(st);
    if (err) {
        em_safetensors_close(st);
        return err;
    }
    *out = st;
    return NULL;
}

em_status em_safetensors_open(const char *path, em_safetensors **out) {
    return em_safetensors_open_with(path, false, out);
}

em_status em_safetensors_open_with(const char *path, bool in_memory, em_safetensors **out) {
    *out = NULL;
    em_mapped_file file;
    em_status err = in_memory ? em_mapped_file_read(path, "a safetensors file", &file)
                              : em_mapped_file_open(path, "a safetensors file", &file);
    if (err) return err;
    em_safetensors *st = em_xcalloc(1, sizeof *st);
    st->path = em_xstrdup(path);
    st->map = file.data;
    st->map_size = file.size;
    st->file = file;
    err = parse(st);
    if (err) {
        em_safetensors_close(st);
        return err;
    }
    *out = st;
    return NULL;
}

void em_safetensors_close(em_safetensors *st) {
    if (!st) return;
    if (st->tensors)
        for (size_t i = 0; i < st->count; i++) free(st->tensors[i].name);
    free(st->tensors);
    em_mapped_file_close(&st->file);
    free(st->path);
    free(st);
}
