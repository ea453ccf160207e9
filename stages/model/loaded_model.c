/* em_model_load: picks the reader by what the path is (a directory or .safetensors file: a
 * Hugging Face checkpoint; a file starting with "GGUF": GGUF), and the helpers every loaded
 * model shares. */
#include "stages/model/loaded_model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stages/model/model_loaders.h"
#include "stages/tokenizer/tokenizer.h"
#include "util/mapped_file.h"
#include "util/suffix.h"

em_status em_model_load(const char *path, em_model **out) {
    return em_model_load_with(path, false, out);
}

em_status em_model_load_with(const char *path, bool in_memory, em_model **out) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot open model: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode) || em_ends_with(path, ".safetensors") ||
        em_ends_with(path, ".safetensors.index.json"))
        return em_model_load_hf(path, in_memory, out);
    /* mapped, not read: a FIFO or device is refused here instead of blocking the read */
    em_mapped_file file;
    em_status err = em_mapped_file_open(path, "a model", &file);
    if (err) return err;
    bool gguf = file.size >= 4 && memcmp(file.data, "GGUF", 4) == 0;
    em_mapped_file_close(&file);
    if (gguf) return em_model_load_gguf(path, in_memory, out);
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "%s: not a model file (expected a GGUF file, a .safetensors file or a "
                        "Hugging Face checkpoint directory)",
                        path);
}

void em_model_free(em_model *model) {
    if (!model) return;
    if (model->tokenizer) em_tokenizer_free(model->tokenizer);
    if (model->impl_free) model->impl_free(model->impl);
    free(model->tensors);
    free(model->layers);
    free(model->path);
    free(model->format);
    free(model);
}

const em_tensor *em_model_find_tensor(const em_model *model, const char *name) {
    for (size_t i = 0; i < model->tensor_count; i++)
        if (strcmp(model->tensors[i].name, name) == 0) return &model->tensors[i];
    return NULL;
}

int64_t em_tensor_numel(const em_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= t->shape[d];
    return n;
}

bool em_layer_is_sliding(const em_llama_config *c, int layer) {
    if (c->sliding_window <= 0 || c->swa_pattern <= 0) return false;
    return c->swa_pattern == 1 || layer % c->swa_pattern < c->swa_pattern - 1;
}
