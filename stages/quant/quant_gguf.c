/* em_quantized_model_write_gguf (see quant_gguf.h). */
#include "stages/quant/quant_gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/model/architectures.h"
#include "stages/formats/ggml_types.h"
#include "stages/formats/gguf.h"
#include "stages/formats/gguf_writer.h"
#include "stages/model/model_storage.h"

#define GGML_QNT_VERSION 2 /* ggml.h: the quantization format version llama-quantize records */

/* llama_ftype of each scheme (llama.h), recorded as general.file_type. */
static const struct {
    const char *scheme;
    uint32_t ftype;
} ftypes[] = {
    {"Q4_0", 2},  {"Q4_1", 3},    {"Q8_0", 7},  {"Q5_0", 8},    {"Q5_1", 9},
    {"Q4_K", 14}, {"Q4_K_M", 15}, {"Q5_K", 16}, {"Q5_K_M", 17}, {"Q6_K", 18},
};

static bool copied_key(const char *key) {
    return strcmp(key, "general.alignment") != 0 && strcmp(key, "general.file_type") != 0 &&
           strcmp(key, "general.quantization_version") != 0;
}

static em_status write_file(const em_model *m, gguf_writer *w, const char *tmp) {
    FILE *f = fopen(tmp, "wb");
    if (!f) return em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot create: %s", tmp, strerror(errno));
    bool ok = gguf_write_header(w, f);
    for (size_t i = 0; ok && i < m->tensor_count; i++) {
        const em_tensor *t = &m->tensors[i];
        ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes && gguf_write_padding(f, t->nbytes);
    }
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        remove(tmp);
        return em_error_new(EM_EXIT_RUNTIME, "%s: write failed: %s", tmp, strerror(errno));
    }
    return NULL;
}

em_status em_quantized_model_write_gguf(const em_model *m, const char *scheme, const char *path) {
    const em_model_storage *storage = m->impl;
    const em_gguf *g = storage ? storage->gguf : NULL;
    if (!g || strcmp(m->format, "gguf") != 0)
        return em_error_new(
            EM_EXIT_BAD_INPUT,
            "%s: writing GGUF needs a model loaded from a GGUF file (this one is %s)", path,
            m->format);
    if (em_architecture_find(m->config.architecture)->gguf_neox)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: writing GGUF for architecture %s is not supported (its Q/K "
                            "rows are reordered in memory)",
                            path, m->config.architecture);
    int ftype = -1;
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (strcmp(ftypes[i].scheme, scheme) == 0) ftype = (int)ftypes[i].ftype;
    if (ftype < 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: scheme %s has no GGUF type (llama.cpp cannot load it)", path,
                            scheme);
    gguf_writer *w = gguf_writer_new(3);
    for (uint64_t i = 0; i < g->kv_count; i++)
        if (copied_key(g->kvs[i].key)) gguf_kv_copy(w, &g->kvs[i]);
    gguf_kv_u32(w, "general.quantization_version", GGML_QNT_VERSION);
    gguf_kv_u32(w, "general.file_type", (uint32_t)ftype);
    for (size_t i = 0; i < m->tensor_count; i++) {
        const em_tensor *t = &m->tensors[i];
        gguf_add_tensor(w, t->name, (uint32_t)t->type, t->n_dims, t->shape, t->nbytes);
    }
    char *tmp = em_xasprintf("%s.tmp", path);
    em_status err = write_file(m, w, tmp);
    gguf_writer_free(w);
    if (!err && rename(tmp, path) != 0)
        err = em_error_new(EM_EXIT_RUNTIME, "%s: cannot rename to %s: %s", tmp, path,
                           strerror(errno));
    free(tmp);
    return err;
}
