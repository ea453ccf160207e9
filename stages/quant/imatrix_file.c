/* llama.cpp importance-matrix files: GGUF and legacy .dat (see imatrix_file.h). */
#include "stages/quant/imatrix_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/atomic_file.h"
#include "stages/formats/gguf.h"
#include "stages/formats/gguf_writer.h"
#include "stages/model/loaded_model.h"

#define F32 0u /* ggml's GGML_TYPE_F32 */

/* The suffixes of an entry's tensors, in the order they are written. */
enum { SUM2, COUNTS, SUM_ABS, MAX_ABS, PARTS };
static const char *const suffixes[PARTS] = {".in_sum2", ".counts", ".in_sum_abs", ".in_max_abs"};

/* Part p of entry e as floats (columns of them; 1 for counts), into out. */
static void part_floats(const em_activation_stat *e, int p, float *out) {
    for (int64_t j = 0; j < (p == COUNTS ? 1 : e->columns); j++)
        out[j] = p == SUM2      ? (float)e->sum_x2[j]
                 : p == COUNTS  ? (float)e->count
                 : p == SUM_ABS ? (float)e->sum_abs[j]
                                : e->max_abs[j];
}

/* Closes a memory stream (open_memstream sets *buf and *len then) and writes its bytes to path,
 * atomically. */
static em_status finish(FILE *mem, char **buf, size_t *len, bool ok, const char *path) {
    if (fclose(mem) != 0) ok = false;
    em_status err = ok ? em_atomic_write(path, *buf, *len, 0644)
                       : em_error_new(EM_EXIT_RUNTIME, "%s: cannot build the file in memory", path);
    free(*buf);
    return err;
}

em_status em_imatrix_write_gguf(const em_activation_stats *s, const char *path) {
    gguf_writer *w = gguf_writer_new(3);
    gguf_kv_string(w, "general.type", "imatrix");
    const char *dataset = s->dataset ? s->dataset : "";
    gguf_kv_string_array(w, "imatrix.datasets", &dataset, s->dataset ? 1 : 0);
    gguf_kv_u32(w, "imatrix.chunk_count", (uint32_t)s->windows);
    gguf_kv_u32(w, "imatrix.chunk_size", (uint32_t)s->window_len);
    int parts = s->has_abs ? PARTS : SUM_ABS;
    int64_t longest = 1;
    for (size_t i = 0; i < s->n; i++) {
        const em_activation_stat *e = &s->entries[i];
        if (e->columns > longest) longest = e->columns;
        for (int p = 0; p < parts; p++) {
            char name[256];
            snprintf(name, sizeof name, "%s%s", e->name, suffixes[p]);
            int64_t shape[4] = {p == COUNTS ? 1 : e->columns, 1, 1, 1};
            gguf_add_tensor(w, name, F32, 2, shape, (size_t)shape[0] * sizeof(float));
        }
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        gguf_writer_free(w);
        return em_error_new(EM_EXIT_RUNTIME, "%s: %s", path, strerror(errno));
    }
    bool ok = gguf_write_header(w, mem);
    gguf_writer_free(w);
    float *values = em_xmalloc((size_t)longest * sizeof *values);
    for (size_t i = 0; ok && i < s->n; i++) {
        const em_activation_stat *e = &s->entries[i];
        for (int p = 0; ok && p < parts; p++) {
            size_t bytes = (size_t)(p == COUNTS ? 1 : e->columns) * sizeof(float);
            part_floats(e, p, values);
            ok = fwrite(values, 1, bytes, mem) == bytes && gguf_write_padding(mem, bytes);
        }
    }
    free(values);
    return finish(mem, &buf, &len, ok, path);
}

static bool put_i32(FILE *f, int64_t v) {
    int32_t x = (int32_t)v;
    return fwrite(&x, sizeof x, 1, f) == 1;
}

em_status em_imatrix_write_dat(const em_activation_stats *s, const char *path) {
    if (s->window_len <= 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: the legacy imatrix format needs the tokens per window, which "
                            "these statistics do not know",
                            path);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return em_error_new(EM_EXIT_RUNTIME, "%s: %s", path, strerror(errno));
    bool ok = put_i32(mem, (int64_t)s->n);
    for (size_t i = 0; ok && i < s->n; i++) {
        const em_activation_stat *e = &s->entries[i];
        size_t name_len = strlen(e->name);
        int64_t ncall = (e->count + s->window_len - 1) / s->window_len;
        ok = put_i32(mem, (int64_t)name_len) && fwrite(e->name, 1, name_len, mem) == name_len &&
             put_i32(mem, ncall) && put_i32(mem, e->columns);
        /* (sum / count) * ncall, in double and rounded once, so that a file read back (count =
         * ncall) is written again with the same bytes; a token-less entry stores 1 */
        for (int64_t j = 0; ok && j < e->columns; j++) {
            float stored =
                e->count == 0 ? 1.0f : (float)(e->sum_x2[j] / (double)e->count * (double)ncall);
            ok = fwrite(&stored, sizeof stored, 1, mem) == 1;
        }
    }
    const char *dataset = s->dataset ? s->dataset : "";
    size_t dataset_len = strlen(dataset);
    ok = ok && put_i32(mem, s->windows) && put_i32(mem, (int64_t)dataset_len) &&
         fwrite(dataset, 1, dataset_len, mem) == dataset_len;
    return finish(mem, &buf, &len, ok, path);
}

static char *copy_n(const char *s, size_t n) {
    char *c = em_xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

/* A new entry named name (len bytes) with columns channels, in s. */
static em_activation_stat *add_entry(em_activation_stats *s, size_t *cap, const char *name,
                                     size_t len, int64_t columns) {
    if (s->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        s->entries = em_xrealloc(s->entries, *cap * sizeof *s->entries);
    }
    em_activation_stat *e = &s->entries[s->n++];
    memset(e, 0, sizeof *e);
    e->name = copy_n(name, len);
    e->columns = columns;
    e->sum_x2 = em_xcalloc((size_t)columns, sizeof *e->sum_x2);
    return e;
}

/* The entry named name (len bytes), or NULL. */
static em_activation_stat *entry_named(em_activation_stats *s, const char *name, size_t len) {
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->entries[i].name) == len && memcmp(s->entries[i].name, name, len) == 0)
            return &s->entries[i];
    return NULL;
}

static const char *suffix_of(const char *name, int *part) {
    size_t n = strlen(name);
    for (int p = 0; p < PARTS; p++) {
        size_t k = strlen(suffixes[p]);
        if (n > k && strcmp(name + n - k, suffixes[p]) == 0) {
            *part = p;
            return name + n - k;
        }
    }
    return NULL;
}

static em_status read_gguf(const em_gguf *g, em_activation_stats *s) {
    em_gguf_string type;
    bool found;
    em_status err = em_gguf_get_string(g, "general.type", &type, &found);
    if (err) return err;
    if (!found || type.len != 7 || memcmp(type.data, "imatrix", 7) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "a GGUF file but not an imatrix (general.type is "
                                               "not \"imatrix\")");
    uint64_t v;
    if (!(err = em_gguf_get_u64(g, "imatrix.chunk_count", &v, &found)) && found)
        s->windows = (int64_t)v;
    if (!err && !(err = em_gguf_get_u64(g, "imatrix.chunk_size", &v, &found)) && found)
        s->window_len = (int64_t)v;
    if (err) return err;
    const em_gguf_kv *ds = em_gguf_find(g, "imatrix.datasets");
    if (ds && ds->value.type == EM_GGUF_ARRAY && ds->value.arr.elem_type == EM_GGUF_STRING &&
        ds->value.arr.count > 0)
        s->dataset = copy_n(ds->value.arr.strings[0].data, ds->value.arr.strings[0].len);
    size_t cap = 0;
    /* in_sum2 first makes the entries (in file order); then the other parts fill them */
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t i = 0; i < g->tensor_count; i++) {
            const em_gguf_tensor_info *t = &g->tensors[i];
            int p;
            const char *suffix = suffix_of(t->name, &p);
            if (!suffix || (pass == 0) != (p == SUM2)) continue; /* .in_sum and others: skipped */
            size_t len = (size_t)(suffix - t->name);
            int64_t n = t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
            if (t->type != F32)
                return em_error_new(EM_EXIT_BAD_INPUT, "tensor '%s' is %s, not F32", t->name,
                                    em_tensor_type_name((int)t->type));
            em_activation_stat *e = entry_named(s, t->name, len);
            if (p == SUM2) {
                if (e) return em_error_new(EM_EXIT_BAD_INPUT, "tensor '%s' appears twice", t->name);
                e = add_entry(s, &cap, t->name, len, n);
            } else if (!e) {
                return em_error_new(EM_EXIT_BAD_INPUT, "tensor '%s' has no '%.*s.in_sum2'", t->name,
                                    (int)len, t->name);
            }
            if (p == COUNTS && n != 1)
                return em_error_new(EM_EXIT_BAD_INPUT,
                                    "tensor '%s' holds %lld counts (one per expert): per-expert "
                                    "statistics are not supported",
                                    t->name, (long long)n);
            if (p != COUNTS && n != e->columns)
                return em_error_new(EM_EXIT_BAD_INPUT, "tensor '%s' has %lld values, not %lld",
                                    t->name, (long long)n, (long long)e->columns);
            const float *x = t->data;
            float one;
            for (int64_t j = 0; j < n; j++) {
                memcpy(&one, x + j, sizeof one);
                if (p == SUM2) e->sum_x2[j] = one;
                if (p == COUNTS && !(one >= 0.0f && one < 0x1p62f))
                    return em_error_new(EM_EXIT_BAD_INPUT, "tensor '%s': count %g", t->name,
                                        (double)one);
                if (p == COUNTS) e->count = llround(one);
                if (p == SUM_ABS) {
                    if (!e->sum_abs) e->sum_abs = em_xcalloc((size_t)n, sizeof *e->sum_abs);
                    e->sum_abs[j] = one;
                }
                if (p == MAX_ABS) {
                    if (!e->max_abs) e->max_abs = em_xcalloc((size_t)n, sizeof *e->max_abs);
                    e->max_abs[j] = one;
                }
            }
        }
    }
    if (s->n == 0) return em_error_new(EM_EXIT_BAD_INPUT, "no '<name>.in_sum2' tensor");
    s->has_abs = true;
    for (size_t i = 0; i < s->n; i++) {
        if (s->entries[i].count > s->tokens) s->tokens = s->entries[i].count;
        if (!s->entries[i].sum_abs || !s->entries[i].max_abs) s->has_abs = false;
    }
    for (size_t i = 0; i < s->n && !s->has_abs; i++) { /* all or nothing */
        free(s->entries[i].sum_abs);
        free(s->entries[i].max_abs);
        s->entries[i].sum_abs = NULL;
        s->entries[i].max_abs = NULL;
    }
    return NULL;
}

/* A cursor over the bytes of a legacy file. */
typedef struct reader {
    const unsigned char *p, *end;
} reader;

static bool get_i32(reader *r, int32_t *v) {
    if (r->end - r->p < 4) return false;
    memcpy(v, r->p, 4);
    r->p += 4;
    return true;
}

static em_status read_dat(const unsigned char *data, size_t size, em_activation_stats *s) {
    reader r = {data, data + size};
    int32_t n;
    if (!get_i32(&r, &n) || n < 1)
        return em_error_new(EM_EXIT_BAD_INPUT, "not an imatrix file (neither GGUF nor a legacy "
                                               "file with entries)");
    size_t cap = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t len, ncall, nval;
        if (!get_i32(&r, &len) || len < 1 || len > 4096 || r.end - r.p < len)
            return em_error_new(EM_EXIT_BAD_INPUT, "entry %d: bad name length", i + 1);
        const char *name = (const char *)r.p;
        r.p += len;
        if (!get_i32(&r, &ncall) || !get_i32(&r, &nval) || ncall < 0 || nval < 1)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "entry %d ('%.*s'): no call and value counts (truncated?)", i + 1,
                                (int)len, name);
        if ((size_t)(r.end - r.p) / sizeof(float) < (size_t)nval)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "entry %d ('%.*s'): its %d values run past the end of the file",
                                i + 1, (int)len, name, nval);
        if (entry_named(s, name, (size_t)len))
            return em_error_new(EM_EXIT_BAD_INPUT, "entry '%.*s' appears twice", (int)len, name);
        em_activation_stat *e = add_entry(s, &cap, name, (size_t)len, nval);
        e->count = ncall;
        for (int32_t j = 0; j < nval; j++) {
            float v;
            memcpy(&v, r.p, sizeof v);
            r.p += sizeof v;
            e->sum_x2[j] = v;
        }
        if (e->count > s->tokens) s->tokens = e->count;
    }
    s->window_len = 1; /* a count is a chunk */
    int32_t chunks, len;
    if (get_i32(&r, &chunks)) s->windows = chunks;
    if (get_i32(&r, &len) && len > 0 && r.end - r.p >= len)
        s->dataset = copy_n((const char *)r.p, (size_t)len);
    return NULL;
}

em_status em_imatrix_read(const char *path, em_activation_stats **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    em_activation_stats *s = em_xcalloc(1, sizeof *s);
    em_status err = NULL;
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0) {
        fclose(f);
        em_gguf *g;
        err = em_gguf_open(path, &g);
        if (err) {
            free(s);
            return err;
        }
        err = read_gguf(g, s);
        em_gguf_close(g);
    } else {
        size_t size = got, cap = 4096;
        unsigned char *data = em_xmalloc(cap);
        memcpy(data, magic, got);
        while (got > 0) {
            if (size == cap) data = em_xrealloc(data, cap *= 2);
            got = fread(data + size, 1, cap - size, f);
            size += got;
        }
        fclose(f);
        err = read_dat(data, size, s);
        free(data);
    }
    if (err) {
        em_activation_stats_free(s);
        return em_error_prefix(err, "%s", path);
    }
    *out = s;
    return NULL;
}
