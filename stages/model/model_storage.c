/* Ownership of a loaded model's mappings and buffers (see model_storage.h). */
#include "stages/model/model_storage.h"

#include <stdlib.h>

#include "util/error.h"
#include "stages/formats/gguf.h"
#include "stages/formats/safetensors.h"

em_model_storage *em_model_storage_new(void) {
    return em_xcalloc(1, sizeof(em_model_storage));
}

void *em_model_storage_keep(em_model_storage *s, void *buffer) {
    s->buffers = em_xrealloc(s->buffers, (s->buffer_count + 1) * sizeof *s->buffers);
    s->buffers[s->buffer_count++] = buffer;
    return buffer;
}

void em_model_storage_add_shard(em_model_storage *s, struct em_safetensors *shard) {
    s->shards = em_xrealloc(s->shards, (s->shard_count + 1) * sizeof *s->shards);
    s->shards[s->shard_count++] = shard;
}

void em_model_storage_free(void *storage) {
    em_model_storage *s = storage;
    if (!s) return;
    for (size_t i = 0; i < s->buffer_count; i++) free(s->buffers[i]);
    free(s->buffers);
    for (size_t i = 0; i < s->shard_count; i++) em_safetensors_close(s->shards[i]);
    free(s->shards);
    em_gguf_close(s->gguf);
    free(s);
}
