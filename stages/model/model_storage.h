/* What a loaded em_model owns besides its tensor table: the parsed GGUF or the safetensors
 * shards (whose mappings the tensors point into), and heap buffers (converted tensors, names).
 * model->impl is one of these and model->impl_free is em_model_storage_free. */
#ifndef EVALMESH_MODEL_STORAGE_H
#define EVALMESH_MODEL_STORAGE_H

#include <stddef.h>

struct em_gguf;
struct em_safetensors;

typedef struct em_model_storage {
    struct em_gguf *gguf;
    struct em_safetensors **shards;
    size_t shard_count;
    void **buffers;
    size_t buffer_count;
} em_model_storage;

em_model_storage *em_model_storage_new(void);
/* Records a malloc'd buffer to free with the model; returns it. */
void *em_model_storage_keep(em_model_storage *s, void *buffer);
/* Takes a safetensors shard, closed with the model. */
void em_model_storage_add_shard(em_model_storage *s, struct em_safetensors *shard);
void em_model_storage_free(void *storage);

#endif
