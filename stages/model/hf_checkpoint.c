/* em_model from a Hugging Face checkpoint: config.json for the hyperparameters, the weights from
 * model.safetensors (or the shards listed in model.safetensors.index.json), tensor names mapped
 * to GGUF's (the architecture table's row for config.json's model_type, architectures.h), Q/K
 * rows permuted into GGUF's order (an owned copy), Gemma's RMSNorm weights w stored as 1 + w (an
 * owned copy, as llama.cpp's converter writes them), and tokenizer.json beside them when present
 * (else tokenizer.gguf, a vocabulary-only GGUF as `evalmesh-mkmodel --from` writes). header_sha256
 * is the SHA-256 of every shard's header (length + JSON) in shard order; the digest covers every
 * byte read: config.json, each whole shard (tensor data included) in shard order, the tokenizer
 * file. */
#include <cjson/cJSON.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/sha256.h"
#include "stages/model/architectures.h"
#include "stages/model/hf_names.h"
#include "stages/model/llama_weights.h"
#include "stages/model/model_loaders.h"
#include "stages/model/model_storage.h"
#include "stages/model/rope_scaling.h"
#include "stages/formats/safetensors.h"
#include "stages/tokenizer/tokenizer.h"
#include "util/regular_file.h"

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Reads a whole JSON file. */
static em_status read_json(const char *path, cJSON **out) {
    *out = NULL;
    char *text;
    size_t len;
    em_status err =
        em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a checkpoint JSON file", &text, &len);
    if (err) return err;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!*out) return em_error_new(EM_EXIT_BAD_INPUT, "%s: not valid JSON", path);
    return NULL;
}

/* An integer field; fallback < 0 means required. */
static em_status cfg_int(const cJSON *cfg, const char *path, const char *key, int64_t fallback,
                         int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) {
        if (fallback < 0)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: missing key \"%s\"", path, key);
        *out = (int)fallback;
        return NULL;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valuedouble < 1 ||
        v->valuedouble > (double)(1 << 30))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: \"%s\" must be an integer from 1 to 2^30", path,
                            key);
    *out = (int)v->valuedouble;
    return NULL;
}

static em_status cfg_float(const cJSON *cfg, const char *path, const char *key, double fallback,
                           float *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) {
        *out = (float)fallback;
        return NULL;
    }
    if (!cJSON_IsNumber(v))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: \"%s\" must be a number", path, key);
    *out = (float)v->valuedouble;
    return NULL;
}

/* A RoPE scaling parameter: a key of config.json's rope_scaling object. */
typedef struct hf_rope_source {
    const cJSON *rope_scaling;
    const char *path;
} hf_rope_source;

static em_status hf_rope_number(const void *source, const char *gguf_key, const char *hf_key,
                                double fallback, double *out) {
    (void)gguf_key;
    const hf_rope_source *s = source;
    const cJSON *v = hf_key ? cJSON_GetObjectItemCaseSensitive(s->rope_scaling, hf_key) : NULL;
    *out = fallback;
    if (!v || cJSON_IsNull(v)) return NULL;
    if (!cJSON_IsNumber(v))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: rope_scaling \"%s\" must be a number", s->path,
                            hf_key);
    *out = v->valuedouble;
    return NULL;
}

/* rope_scaling (null, or an object whose rope_type or type names a row of the scaling table,
 * rope_scaling.h; "default" is none). */
static em_status cfg_rope_scaling(const cJSON *cfg, const char *path, em_llama_config *c) {
    c->rope_scaling = EM_ROPE_SCALING_NONE;
    c->rope_freq_scale = 1.0f;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return NULL;
    if (!cJSON_IsObject(rs))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: \"rope_scaling\" must be an object or null",
                            path);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    float factor = 1.0f;
    em_status err = cfg_float(rs, path, "factor", 1.0, &factor);
    if (err) return err;
    const em_rope_scaling_kind *kind = strcmp(t, "default") == 0
                                           ? em_rope_scaling_of(EM_ROPE_SCALING_NONE)
                                           : em_rope_scaling_find(t, strlen(t));
    if (!kind)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: rope_scaling type '%.32s' is not supported (%s)", path, t,
                            em_rope_scaling_names());
    hf_rope_source source = {rs, path};
    em_rope_params params = {hf_rope_number, &source, path};
    return kind->read(&params, factor, c);
}

/* The row of config.json's model_type (or, without one, of architectures[0]; without both,
 * llama's). */
static em_status find_architecture(const cJSON *cfg, const char *path,
                                   const em_architecture **row) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    const cJSON *first = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const char *model_type = cJSON_IsString(mt) ? mt->valuestring : NULL;
    const char *hf_class = cJSON_IsString(first) ? first->valuestring : NULL;
    *row = model_type || hf_class ? em_architecture_find_hf(model_type, hf_class)
                                  : em_architecture_find("llama"); /* neither: a Llama */
    if (*row) return NULL;
    return em_error_new(EM_EXIT_BAD_INPUT, "%s: %s '%.48s' is not supported (supported: %s)", path,
                        model_type ? "model_type" : "architecture",
                        model_type ? model_type : hf_class, em_architecture_hf_names());
}

/* A soft-capping value: absent is the architecture's default (transformers' config default),
 * null is none. */
static em_status cfg_softcap(const cJSON *cfg, const char *path, const char *key, float fallback,
                             float *out) {
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cfg, key))) {
        *out = 0;
        return NULL;
    }
    return cfg_float(cfg, path, key, fallback, out);
}

/* Newer configs list every layer's attention ("sliding_attention" or "full_attention"); they must
 * agree with the architecture's pattern, which is what the forward applies. */
static em_status check_layer_types(const cJSON *cfg, const char *path, const em_llama_config *c) {
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(cfg, "layer_types");
    if (!types || cJSON_IsNull(types) || c->sliding_window <= 0) return NULL;
    if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->n_layers)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: \"layer_types\" must be a list of %d layer types", path,
                            c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        const cJSON *t = cJSON_GetArrayItem(types, l);
        bool sliding = cJSON_IsString(t) && strcmp(t->valuestring, "sliding_attention") == 0;
        if (sliding != em_layer_is_sliding(c, l))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: \"layer_types\"[%d] is %s but %s's pattern makes layer %d "
                                "%s",
                                path, l, sliding ? "sliding_attention" : "not sliding_attention",
                                c->architecture, l, sliding ? "full" : "sliding");
    }
    return NULL;
}

/* The block's features: the row's, then its keys (absent or null: the row's defaults). */
static em_status read_features(const cJSON *cfg, const char *path, const em_architecture *row,
                               em_llama_config *c) {
    em_architecture_features(row, c);
    const cJSON *swa = cJSON_GetObjectItemCaseSensitive(cfg, "use_sliding_window");
    if (cJSON_IsTrue(swa))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: \"use_sliding_window\": true (Qwen's layer-dependent window) is "
                            "not supported",
                            path);
    em_status err = NULL;
    if (row->hf_query_scalar_key)
        err = cfg_int(cfg, path, row->hf_query_scalar_key, c->head_dim, &c->attn_scale_base);
    if (!err && row->hf_attn_softcap_key)
        err = cfg_softcap(cfg, path, row->hf_attn_softcap_key, row->attn_softcap, &c->attn_softcap);
    if (!err && row->hf_final_softcap_key)
        err = cfg_softcap(cfg, path, row->hf_final_softcap_key, row->final_softcap,
                          &c->final_softcap);
    if (!err && row->swa_pattern) err = cfg_int(cfg, path, "sliding_window", 0, &c->sliding_window);
    if (!err && row->hf_swa_pattern_key)
        err = cfg_int(cfg, path, row->hf_swa_pattern_key, row->swa_pattern, &c->swa_pattern);
    if (!err && row->hf_rope_swa_key)
        err = cfg_float(cfg, path, row->hf_rope_swa_key, row->rope_freq_base_swa,
                        &c->rope_freq_base_swa);
    if (!err) err = check_layer_types(cfg, path, c);
    if (!err && (c->attn_softcap < 0 || c->final_softcap < 0 || c->rope_freq_base_swa < 0))
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: soft-capping values and rope_local_base_freq must not be negative",
                           path);
    return err;
}

static em_status read_config(const char *path, em_llama_config *c) {
    cJSON *cfg;
    em_status err = read_json(path, &cfg);
    if (err) return err;
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a JSON object", path);
    }
    const em_architecture *row = NULL;
    err = find_architecture(cfg, path, &row);
    if (!err) err = cfg_int(cfg, path, "hidden_size", -1, &c->dim);
    if (!err) err = cfg_int(cfg, path, "intermediate_size", -1, &c->ffn_dim);
    if (!err) err = cfg_int(cfg, path, "num_hidden_layers", -1, &c->n_layers);
    if (!err) err = cfg_int(cfg, path, "num_attention_heads", -1, &c->n_heads);
    if (!err) err = cfg_int(cfg, path, "num_key_value_heads", c->n_heads, &c->n_kv_heads);
    if (!err) err = cfg_int(cfg, path, "head_dim", c->dim / c->n_heads, &c->head_dim);
    if (!err) err = cfg_int(cfg, path, "max_position_embeddings", 2048, &c->n_ctx_train);
    if (!err) err = cfg_int(cfg, path, "vocab_size", -1, &c->n_vocab);
    if (!err) err = cfg_float(cfg, path, "rms_norm_eps", 1e-6, &c->rms_eps);
    if (!err) err = cfg_float(cfg, path, "rope_theta", 10000.0, &c->rope_freq_base);
    if (!err) err = cfg_rope_scaling(cfg, path, c);
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(cfg, "attention_bias");
    if (cJSON_IsTrue(bias)) c->has_qkv_bias = true;
    c->rope_dim = c->head_dim;
    if (!err) err = read_features(cfg, path, row, c);
    cJSON_Delete(cfg);
    return err;
}

/* The shard files: the index's weight_map values (each once, in order of first use). */
static em_status shard_list(const char *dir, const char *index_path, char ***files, size_t *n) {
    *files = NULL;
    *n = 0;
    cJSON *index;
    em_status err = read_json(index_path, &index);
    if (err) return err;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(index);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: no \"weight_map\" object", index_path);
    }
    for (const cJSON *it = map->child; it; it = it->next) {
        if (!cJSON_IsString(it) || strchr(it->valuestring, '/')) {
            cJSON_Delete(index);
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: weight_map entry %s must name a file in the same folder",
                                index_path, it->string);
        }
        bool seen = false;
        for (size_t i = 0; i < *n && !seen; i++)
            seen = strcmp(strrchr((*files)[i], '/') + 1, it->valuestring) == 0;
        if (seen) continue;
        *files = em_xrealloc(*files, (*n + 1) * sizeof **files);
        (*files)[(*n)++] = em_xasprintf("%s/%s", dir, it->valuestring);
    }
    cJSON_Delete(index);
    return NULL;
}

/* Adds one shard's tensors to the model under their GGUF names (em_llama_bind permutes the Q/K
 * rows). */
static em_status add_shard(em_model *m, em_model_storage *storage, em_safetensors *st) {
    const em_architecture *arch = em_architecture_find(m->config.architecture);
    m->tensors = em_xrealloc(m->tensors, (m->tensor_count + st->count) * sizeof *m->tensors);
    for (size_t i = 0; i < st->count; i++) {
        const em_st_tensor *s = &st->tensors[i];
        char name[256];
        if (!em_hf_to_gguf_name(arch, s->name, name, sizeof name))
            snprintf(name, sizeof name, "%s", s->name);
        if (em_model_find_tensor(m, name))
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: tensor %s appears in more than one shard",
                                st->path, s->name);
        em_tensor *t = &m->tensors[m->tensor_count++];
        t->name = em_model_storage_keep(storage, em_xstrdup(name));
        t->type = s->type;
        t->n_dims = s->n_dims > 0 ? s->n_dims : 1;
        for (int d = 0; d < 4; d++) t->shape[d] = d < s->n_dims ? s->shape[s->n_dims - 1 - d] : 1;
        t->data = s->data;
        t->nbytes = s->nbytes;
    }
    return NULL;
}

/* path itself when it is a .safetensors file or an index, else what the directory holds. */
static em_status find_shards(const char *path, bool is_dir, const char *dir, char ***files,
                             size_t *n) {
    if (!is_dir && strstr(path, ".safetensors.index.json")) return shard_list(dir, path, files, n);
    char *single = is_dir ? em_xasprintf("%s/model.safetensors", dir) : em_xstrdup(path);
    char *index = em_xasprintf("%s/model.safetensors.index.json", dir);
    em_status err = NULL;
    if (!is_dir || file_exists(single)) {
        *files = em_xmalloc(sizeof **files);
        (*files)[0] = single;
        *n = 1;
        single = NULL;
    } else if (file_exists(index)) {
        err = shard_list(dir, index, files, n);
    } else {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: no model.safetensors or model.safetensors.index.json", path);
    }
    free(single);
    free(index);
    return err;
}

static em_status load(em_model *m, em_model_storage *storage, const char *path, bool in_memory) {
    struct stat st;
    bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    char *path_copy = em_xstrdup(path);
    char *dir = em_xstrdup(is_dir ? path : dirname(path_copy));
    free(path_copy);
    char *config = em_xasprintf("%s/config.json", dir);
    char *tokenizer = em_xasprintf("%s/tokenizer.json", dir);
    char *tokenizer_gguf = em_xasprintf("%s/tokenizer.gguf", dir);
    char **files = NULL;
    size_t n_files = 0;
    em_status err = NULL;
    if (!file_exists(config))
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: a safetensors checkpoint needs config.json (not found: %s)", path,
                           config);
    if (!err) err = read_config(config, &m->config);
    if (!err) err = find_shards(path, is_dir, dir, &files, &n_files);
    em_content_digest content;
    em_content_digest_init(&content);
    if (!err) err = em_content_digest_update_file(&content, config, "a model config");
    em_sha256 sha;
    em_sha256_init(&sha);
    for (size_t i = 0; i < n_files && !err; i++) {
        em_safetensors *shard;
        err = em_safetensors_open_with(files[i], in_memory, &shard);
        if (err) break;
        em_model_storage_add_shard(storage, shard);
        em_sha256_update(&sha, shard->map, shard->header_bytes);
        em_content_digest_update(&content, shard->map, shard->map_size);
        m->file_size += shard->map_size;
        err = add_shard(m, storage, shard);
    }
    uint8_t digest[32];
    em_sha256_final(&sha, digest);
    em_sha256_to_hex(digest, m->header_sha256);
    if (!err) err = em_llama_config_check(&m->config, path);
    if (!err) err = em_llama_bind(m, storage, true);
    if (!err && em_architecture_find(m->config.architecture)->hf_norm_offset)
        em_llama_norm_offset(m, storage);
    const char *tokenizer_file = file_exists(tokenizer)        ? tokenizer
                                 : file_exists(tokenizer_gguf) ? tokenizer_gguf
                                                               : NULL;
    if (!err && tokenizer_file) err = em_tokenizer_load(tokenizer_file, &m->tokenizer);
    if (!err && tokenizer_file)
        err = em_content_digest_update_file(&content, tokenizer_file, "a tokenizer file");
    em_content_digest_final(&content, m->digest);
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    free(dir);
    free(config);
    free(tokenizer);
    free(tokenizer_gguf);
    return err;
}

em_status em_model_load_hf(const char *path, bool in_memory, em_model **out) {
    *out = NULL;
    em_model_storage *storage = em_model_storage_new();
    em_model *m = em_xcalloc(1, sizeof *m);
    m->path = em_xstrdup(path);
    m->format = em_xstrdup("safetensors");
    m->impl = storage;
    m->impl_free = em_model_storage_free;
    em_status err = load(m, storage, path, in_memory);
    if (err) {
        em_model_free(m);
        return err;
    }
    *out = m;
    return NULL;
}
