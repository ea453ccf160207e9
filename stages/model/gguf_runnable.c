/* Why a well-formed GGUF cannot run (gguf_runnable.h): each check reads the parsed header only,
 * so every problem is reported, not just the first the loader meets. */
#include "stages/model/gguf_runnable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stages/model/architectures.h"
#include "stages/formats/ggml_types.h"
#include "stages/tokenizer/tokenizer.h"

bool em_path_is_gguf(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false; /* a FIFO would block */
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char magic[4];
    bool gguf = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    fclose(f);
    return gguf;
}

static void add(em_gguf_reasons *r, char *text) {
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->items[i], text) == 0) {
            free(text);
            return;
        }
    r->items = em_xrealloc(r->items, (r->count + 1) * sizeof *r->items);
    r->items[r->count++] = text;
}

/* An error's message without its leading "<path>: ". */
static char *without_path(const em_gguf *g, const em_error *err) {
    size_t n = strlen(g->path);
    const char *m = err->message;
    if (strncmp(m, g->path, n) == 0 && strncmp(m + n, ": ", 2) == 0) m += n + 2;
    return em_xstrdup(m);
}

static void check_architecture(const em_gguf *g, em_gguf_reasons *r) {
    em_gguf_string arch;
    bool found;
    em_status err = em_gguf_get_string(g, "general.architecture", &arch, &found);
    if (err) {
        add(r, without_path(g, err));
        em_error_free(err);
    } else if (!found) {
        add(r, em_xstrdup("no general.architecture key"));
    } else {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(arch.len > 63 ? 63 : arch.len), arch.data);
        if (!em_architecture_find(name))
            add(r, em_xasprintf("architecture '%s' is not supported (supported: %s)", name,
                                em_architecture_names()));
    }
}

/* One reason per type evalmesh does not compute with, naming its first tensor. */
static void check_tensor_types(const em_gguf *g, em_gguf_reasons *r) {
    if (g->tensor_count == 0) {
        add(r, em_xstrdup("the file has no tensors (a vocabulary-only file)"));
        return;
    }
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        uint32_t type = g->tensors[i].type;
        if (em_ggml_type_supported(type)) continue;
        bool seen = false;
        for (uint64_t j = 0; j < i && !seen; j++) seen = g->tensors[j].type == type;
        if (seen) continue;
        size_t count = 0;
        for (uint64_t j = i; j < g->tensor_count; j++) count += g->tensors[j].type == type;
        const char *name = em_ggml_type_info_get(type)->name;
        if (count == 1)
            add(r, em_xasprintf("tensor %s has type %s, which evalmesh does not compute with "
                                "(supported: %s)",
                                g->tensors[i].name, name, em_ggml_supported_names()));
        else
            add(r, em_xasprintf("tensor %s and %zu more have type %s, which evalmesh does not "
                                "compute with (supported: %s)",
                                g->tensors[i].name, count - 1, name, em_ggml_supported_names()));
    }
}

static void check_tokenizer(const em_gguf *g, em_gguf_reasons *r) {
    if (!em_gguf_find(g, "tokenizer.ggml.model")) return;
    em_tokenizer *tok = NULL;
    em_status err = em_tokenizer_from_gguf(g, &tok);
    if (err) {
        add(r, without_path(g, err));
        em_error_free(err);
    }
    em_tokenizer_free(tok);
}

em_gguf_reasons em_gguf_runnable_reasons(const em_gguf *g, em_status load_err) {
    em_gguf_reasons r = {0};
    if (!load_err) return r;
    check_architecture(g, &r);
    check_tensor_types(g, &r);
    check_tokenizer(g, &r);
    if (r.count == 0) add(&r, without_path(g, load_err));
    return r;
}

void em_gguf_reasons_free(em_gguf_reasons *r) {
    for (size_t i = 0; i < r->count; i++) free(r->items[i]);
    free(r->items);
    *r = (em_gguf_reasons){0};
}
