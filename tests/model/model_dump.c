/* model_dump MODEL: prints, as JSON, what em_model_load made of a model file: format, config,
 * header checksum and, per tensor, name, type, shape, bytes and the SHA-256 of its data as
 * loaded. The NumPy reader test compares this with its own reading of the file. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/sha256.h"
#include "stages/model/loaded_model.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: model_dump MODEL\n");
        return 2;
    }
    em_model *m;
    em_status err = em_model_load(argv[1], &m);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        return err->exit_code;
    }
    const em_llama_config *c = &m->config;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", m->format);
    cJSON_AddStringToObject(root, "header_sha256", m->header_sha256);
    cJSON_AddNumberToObject(root, "file_size", (double)m->file_size);
    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    cJSON_AddStringToObject(cfg, "architecture", c->architecture);
    cJSON_AddNumberToObject(cfg, "n_vocab", c->n_vocab);
    cJSON_AddNumberToObject(cfg, "dim", c->dim);
    cJSON_AddNumberToObject(cfg, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(cfg, "ffn_dim", c->ffn_dim);
    cJSON_AddNumberToObject(cfg, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(cfg, "n_kv_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(cfg, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(cfg, "rope_dim", c->rope_dim);
    cJSON_AddNumberToObject(cfg, "n_ctx_train", c->n_ctx_train);
    cJSON_AddNumberToObject(cfg, "rope_freq_base", c->rope_freq_base);
    cJSON_AddNumberToObject(cfg, "rms_eps", c->rms_eps);
    cJSON_AddBoolToObject(cfg, "tied_output", c->tied_output);
    cJSON_AddBoolToObject(cfg, "has_qkv_bias", c->has_qkv_bias);
    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (size_t i = 0; i < m->tensor_count; i++) {
        const em_tensor *t = &m->tensors[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "type", em_tensor_type_name(t->type));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->n_dims; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddNumberToObject(e, "nbytes", (double)t->nbytes);
        char hex[65];
        em_sha256_hex(t->data, t->nbytes, hex);
        cJSON_AddStringToObject(e, "sha256", hex);
        cJSON_AddItemToArray(tensors, e);
    }
    char *text = cJSON_PrintUnformatted(root);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(root);
    em_model_free(m);
    return 0;
}
