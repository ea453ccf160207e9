/* Stage `model`: loads a model file (GGUF or a Hugging Face safetensors checkpoint) on this rank
 * and produces a "model" artifact with data = em_model * (stages/model/loaded_model.h). Weights are
 * mmapped, so ranks on one node share the page cache. Options: path (relative to the recipe
 * file's directory), format (auto|gguf|safetensors), tokenizer (a replacement tokenizer file),
 * header_sha256 (the expected header checksum), digest (the expected content digest, tensor data
 * included: loaded_model.h), check_finite (auto|true|false: look through every weight for NaN or
 * infinity, finite_check.h; auto does it for files under 2 GiB), mmap (false: the weights read
 * into this rank's own memory in huge pages, loaded_model.h's em_model_load_with). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/stage.h"
#include "util/log.h"
#include "stages/model/finite_check.h"
#include "stages/model/loaded_model.h"
#include "stages/tokenizer/tokenizer.h"

typedef struct model_state {
    char *path;
    char *tokenizer; /* NULL: the model's own */
    const char *format;
    const char *header_sha256;
    const char *digest;
    const char *check_finite; /* "auto", "true" or "false" */
    bool mmap;
} model_state;

static em_status model_init(em_stage *self, const em_run_context *ctx) {
    model_state *st = em_xcalloc(1, sizeof *st);
    self->state = st;
    st->format = em_node_option_string(self->options, "format");
    st->header_sha256 = em_node_get_string(self->options, "header_sha256", NULL);
    st->digest = em_node_get_string(self->options, "digest", NULL);
    st->check_finite = em_node_option_string(self->options, "check_finite");
    st->mmap = em_node_option_bool(self->options, "mmap");
    /* a checkpoint may be a directory; a replacement tokenizer is one file */
    em_status err = em_stage_input_file(self, "path", true, &st->path);
    if (!err && em_node_get(self->options, "tokenizer"))
        err = em_stage_input_file(self, "tokenizer", false, &st->tokenizer);
    return err;
}

static void free_model(void *data) {
    em_model_free(data);
}

static em_status model_run(em_stage *self, const em_run_context *ctx) {
    model_state *st = self->state;
    em_model *m;
    em_status err = em_model_load_with(st->path, !st->mmap, &m);
    if (err) return err;
    if (strcmp(st->format, "auto") != 0 && strcmp(st->format, m->format) != 0)
        err = em_error_new(EM_EXIT_BAD_INPUT, "%s is a %s model but the stage says format: %s",
                           st->path, m->format, st->format);
    if (!err && st->header_sha256 && strcmp(st->header_sha256, m->header_sha256) != 0)
        err = em_error_new(EM_EXIT_BAD_INPUT, "%s: header sha256 is %s but the stage expects %s",
                           st->path, m->header_sha256, st->header_sha256);
    if (!err && st->digest && strcmp(st->digest, m->digest) != 0)
        err = em_error_new(EM_EXIT_BAD_INPUT, "%s: digest is %s but the stage expects %s", st->path,
                           m->digest, st->digest);
    bool check_finite =
        strcmp(st->check_finite, "true") == 0 ||
        (strcmp(st->check_finite, "auto") == 0 && m->file_size < EM_FINITE_CHECK_AUTO_BYTES);
    if (!err && check_finite) {
        err = em_tensors_check_finite(m->tensors, m->tensor_count, EM_EXIT_RUNTIME);
        if (err) err = em_error_prefix(err, "%s", st->path);
    }
    if (!err && st->tokenizer) {
        em_tokenizer *tok;
        err = em_tokenizer_load(st->tokenizer, &tok);
        if (!err) {
            if (m->tokenizer) em_tokenizer_free(m->tokenizer);
            m->tokenizer = tok;
        }
    }
    if (err) {
        em_model_free(m);
        return err;
    }
    const em_llama_config *c = &m->config;
    em_log_info("model %s: %s %s, %d layers, dim %d, %d/%d heads, vocab %d, %zu tensors%s",
                self->name, m->format, c->architecture, c->n_layers, c->dim, c->n_heads,
                c->n_kv_heads, c->n_vocab, m->tensor_count, m->tokenizer ? "" : ", no tokenizer");
    self->output = (em_artifact){.data = m, .free = free_model};
    return NULL;
}

static void model_destroy(em_stage *self) {
    model_state *st = self->state;
    if (!st) return;
    free(st->path);
    free(st->tokenizer);
    free(st);
}

const em_stage_kind em_stage_kind_model = {
    .name = "model",
    .summary = "load a GGUF file or safetensors checkpoint (weights mmapped, config, tokenizer)",
    .produces = "model",
    .inputs = NULL,
    .collective = false,
    .init = model_init,
    .run = model_run,
    .destroy = model_destroy,
};
