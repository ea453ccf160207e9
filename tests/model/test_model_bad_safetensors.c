/* safetensors and Hugging Face checkpoints: bad headers (length, JSON, dtype, shape, offsets
 * out of bounds, overlapping, wrong sizes, duplicate names), a real header cut at every offset,
 * bad config.json files, missing files and tensors, and a sharded checkpoint (index plus two
 * shards) that loads to the same tensors as the single file. Each error is one clear message with
 * exit status 2. argv[1] is the evalmesh-mkmodel binary. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/stat.h>

#include "model_test_util.h"
#include "safetensors_writer.h"
#include "stages/model/loaded_model.h"
#include "stages/formats/safetensors.h"
#include "test.h"

/* 8-byte length + json + data_len bytes of data (values 0, 1, 2, ...). */
static uint8_t *make_st(const char *json, size_t data_len, size_t *size) {
    uint64_t len = strlen(json);
    *size = 8 + len + data_len;
    uint8_t *b = em_xmalloc(*size);
    memcpy(b, &len, 8);
    memcpy(b + 8, json, len);
    for (size_t i = 0; i < data_len; i++) b[8 + len + i] = (uint8_t)i;
    return b;
}

static char *parse_error(const uint8_t *data, size_t size) {
    uint8_t *copy = em_xmalloc(size ? size : 1);
    memcpy(copy, data, size);
    em_safetensors *st = NULL;
    em_status err = em_safetensors_parse(copy, size, "x.safetensors", &st);
    if (!err) em_safetensors_close(st);
    char *msg = bad_input_message(err);
    free(copy);
    return msg;
}

static void expect(const char *json, size_t data_len, const char *want) {
    size_t size;
    uint8_t *b = make_st(json, data_len, &size);
    char *msg = parse_error(b, size);
    CHECK_CONTAINS(msg, want);
    free(msg);
    free(b);
}

static void check_headers(void) {
    size_t size;
    uint8_t *b =
        make_st("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"BF16\",\"shape\":"
                "[2,3],\"data_offsets\":[0,12]},\"b\":{\"dtype\":\"F32\",\"shape\":[],"
                "\"data_offsets\":[12,16]}}",
                16, &size);
    em_safetensors *st;
    em_status err = em_safetensors_parse(b, size, "ok.safetensors", &st);
    CHECK(err == NULL);
    if (!err) {
        CHECK_INT_EQ(st->count, 2);
        CHECK_STR_EQ(st->tensors[0].name, "a");
        CHECK_INT_EQ(st->tensors[0].type, EM_TENSOR_BF16);
        CHECK(st->tensors[0].n_dims == 2 && st->tensors[0].shape[0] == 2 &&
              st->tensors[0].shape[1] == 3);
        CHECK(st->tensors[0].data == b + st->header_bytes && st->tensors[0].nbytes == 12);
        CHECK(st->tensors[1].n_dims == 0 && st->tensors[1].nbytes == 4);
        CHECK(((const uint8_t *)st->tensors[1].data)[0] == 12);
        em_safetensors_close(st);
    }
    em_error_free(err);
    free(b);

    char *msg = parse_error((const uint8_t *)"\x10\0\0\0\0", 5);
    CHECK_CONTAINS(msg, "x.safetensors: truncated in the header length (needs 8 bytes at offset "
                        "0, file has 5)");
    free(msg);
    uint64_t len = 1000;
    uint8_t head[20] = {0};
    memcpy(head, &len, 8);
    msg = parse_error(head, sizeof head);
    CHECK_CONTAINS(msg, "x.safetensors: truncated in the JSON header (needs 1000 bytes at offset "
                        "8, file has 20)");
    free(msg);
    uint64_t huge = UINT64_MAX;
    memcpy(head, &huge, 8);
    msg = parse_error(head, sizeof head);
    CHECK_CONTAINS(msg, "truncated in the JSON header (needs 18446744073709551615 bytes");
    free(msg);

    expect("{\"a\":", 0, "x.safetensors: the header is not valid JSON");
    expect("[1,2]", 0, "x.safetensors: the header is not a JSON object");
    expect("{\"a\":[1]}", 0, "x.safetensors: tensor a is not a JSON object");
    expect("{\"x\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
           "x.safetensors: tensor x has dtype I64; supported: F32, F16, BF16");
    expect("{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           "x.safetensors: tensor x has no string \"dtype\"");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
           "tensor x needs a \"shape\" list of at most 4 dimensions");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
           "tensor x: shape entry 0 is not a non-negative integer");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
           "tensor x: shape entry 0 is not a non-negative integer");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,4503599627370496],"
           "\"data_offsets\":[0,4]}}",
           4, "tensor x has an impossibly large shape");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
           "tensor x needs \"data_offsets\": [begin, end]");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,48]}}", 24,
           "x.safetensors: tensor x data_offsets [0, 48] are outside the 24 bytes of tensor data");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 24,
           "tensor x data_offsets [8, 4] are outside");
    expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24,
           "x.safetensors: tensor x has 20 bytes but its shape and dtype need 6 x 4");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
           "\"b\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[8,24]}}",
           24, "x.safetensors: tensors a [0, 16] and b [8, 24] overlap");
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, "x.safetensors: duplicate tensor name a");
}

/* A real file cut at every offset of its header and at many of its data. */
static void check_truncation(const char *path) {
    size_t size;
    uint8_t *bytes = read_file(path, &size);
    uint64_t json_len;
    memcpy(&json_len, bytes, 8);
    size_t header = 8 + (size_t)json_len;
    int failures = 0;
    for (size_t cut = 0; cut < size; cut += cut < header ? 1 : 101) {
        char *msg = parse_error(bytes, cut);
        const char *want = cut < header ? "truncated" : "are outside the";
        if (!strstr(msg, want) && failures++ < 5)
            fprintf(stderr, "cut at %zu: '%s' lacks '%s'\n", cut, msg, want);
        free(msg);
    }
    CHECK_INT_EQ(failures, 0);
    free(bytes);
}

static void expect_load(const char *path, const char *want) {
    em_model *m = NULL;
    em_status err = em_model_load(path, &m);
    CHECK(err != NULL);
    if (err) {
        CHECK_CONTAINS(err->message, want);
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        em_error_free(err);
    }
    em_model_free(m);
}

/* Rewrites dir/config.json with one key set to a JSON value (NULL removes it). */
static void set_config(const char *dir, const char *key, const char *json_value) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t size;
    char *text = (char *)read_file(path, &size);
    cJSON *cfg = cJSON_ParseWithLength(text, size);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
    if (json_value) cJSON_AddItemToObject(cfg, key, cJSON_Parse(json_value));
    char *out = cJSON_Print(cfg);
    write_file(path, out, strlen(out));
    free(out);
    cJSON_Delete(cfg);
}

static void check_checkpoint_errors(const char *mk, const char *root) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/ck", root);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --format safetensors --type f16", dir), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t cfg_size;
    uint8_t *cfg = read_file(path, &cfg_size);

    set_config(dir, "hidden_size", NULL);
    expect_load(dir, "config.json: missing key \"hidden_size\"");
    write_file(path, cfg, cfg_size);
    set_config(dir, "model_type", "\"falcon\"");
    expect_load(dir,
                "config.json: model_type 'falcon' is not supported (supported: llama, mistral, "
                "qwen2, qwen3, gemma, gemma2, gemma3_text, phi3)");
    write_file(path, cfg, cfg_size);
    set_config(dir, "rope_scaling", "{\"rope_type\": \"longrope\", \"factor\": 4}");
    expect_load(
        dir,
        "config.json: rope_scaling type 'longrope' is not supported (none, linear, llama3, yarn)");
    write_file(path, cfg, cfg_size);
    set_config(dir, "num_attention_heads", "2.5");
    expect_load(dir, "config.json: \"num_attention_heads\" must be an integer from 1 to 2^30");
    write_file(path, cfg, cfg_size);
    set_config(dir, "intermediate_size", "128");
    expect_load(dir, "tensor blk.0.ffn_gate.weight has shape {64, 256} but the config needs {64, "
                     "128}");
    write_file(path, cfg, cfg_size);
    set_config(dir, "attention_bias", "true");
    expect_load(dir, "missing tensor blk.0.attn_q.bias");
    write_file(path, cfg, cfg_size);
    write_file(path, "{not json", 9);
    expect_load(dir, "config.json: not valid JSON");
    write_file(path, cfg, cfg_size);

    /* a tensor renamed in the header */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t size;
    uint8_t *st = read_file(path, &size);
    uint8_t *name = memmem(st, size, "model.norm.weight", 17);
    CHECK(name != NULL);
    if (name) {
        memcpy(name + 7, "x", 1);
        write_file(path, st, size);
        expect_load(dir, "missing tensor output_norm.weight");
    }
    remove(path);
    expect_load(dir, "no model.safetensors or model.safetensors.index.json");
    free(st);
    snprintf(path, sizeof path, "%s/config.json", dir);
    remove(path);
    expect_load(dir, "a safetensors checkpoint needs config.json");
    free(cfg);
}

/* Splits dir/model.safetensors into two shards with an index, in dir/sharded. */
static void write_shards(const char *dir, const char *out, bool duplicate) {
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    em_safetensors *st;
    em_status err = em_safetensors_open(path, &st);
    CHECK(err == NULL);
    if (err) return;
    cJSON *index = cJSON_CreateObject();
    cJSON *map = cJSON_AddObjectToObject(index, "weight_map");
    size_t half = st->count / 2;
    for (int shard = 0; shard < 2; shard++) {
        size_t begin = shard == 0 ? 0 : half, end = shard == 0 ? half : st->count;
        if (duplicate && shard == 1) begin--; /* the last tensor of shard 1 again */
        st_entry *entries = em_xcalloc(end - begin, sizeof *entries);
        for (size_t i = begin; i < end; i++) {
            const em_st_tensor *t = &st->tensors[i];
            st_entry *e = &entries[i - begin];
            e->name = t->name;
            e->dtype = em_tensor_type_name(t->type);
            e->n_dims = t->n_dims;
            memcpy(e->shape, t->shape, sizeof e->shape);
            e->nbytes = t->nbytes;
            if (!cJSON_GetObjectItemCaseSensitive(map, t->name))
                cJSON_AddStringToObject(map, t->name,
                                        shard == 0 ? "model-00001-of-00002.safetensors"
                                                   : "model-00002-of-00002.safetensors");
        }
        snprintf(path, sizeof path, "%s/model-0000%d-of-00002.safetensors", out, shard + 1);
        FILE *f = fopen(path, "wb");
        CHECK(st_write_header(f, entries, end - begin));
        for (size_t i = begin; i < end; i++)
            fwrite(st->tensors[i].data, 1, st->tensors[i].nbytes, f);
        fclose(f);
        free(entries);
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", out);
    char *text = cJSON_Print(index);
    write_file(path, text, strlen(text));
    free(text);
    cJSON_Delete(index);
    em_safetensors_close(st);
    char *cmd = em_xasprintf("cp '%s/config.json' '%s/tokenizer.json' '%s/'", dir, dir, out);
    CHECK(system(cmd) == 0);
    free(cmd);
}

static void check_shards(const char *mk, const char *root) {
    char dir[512], sharded[600], dup[600];
    snprintf(dir, sizeof dir, "%s/single", root);
    snprintf(sharded, sizeof sharded, "%s/sharded", root);
    snprintf(dup, sizeof dup, "%s/dup", root);
    CHECK_INT_EQ(run_mkmodel(mk, "--out %s --format safetensors --type bf16 --layers 3", dir), 0);
    check_truncation(strcat(strcpy(sharded, dir), "/model.safetensors"));
    snprintf(sharded, sizeof sharded, "%s/sharded", root);
    mkdir(sharded, 0777);
    mkdir(dup, 0777);
    write_shards(dir, sharded, false);
    write_shards(dir, dup, true);
    em_model *a = NULL, *b = NULL;
    em_status err = em_model_load(dir, &a);
    CHECK(err == NULL);
    em_error_free(err);
    err = em_model_load(sharded, &b);
    CHECK(err == NULL);
    if (err) fprintf(stderr, "%s\n", err->message);
    em_error_free(err);
    if (a && b) {
        CHECK_INT_EQ(a->tensor_count, b->tensor_count);
        for (size_t i = 0; i < a->tensor_count; i++) {
            const em_tensor *x = &a->tensors[i], *y = em_model_find_tensor(b, x->name);
            CHECK(y && y->nbytes == x->nbytes && memcmp(x->data, y->data, x->nbytes) == 0);
        }
        CHECK(b->file_size > a->file_size); /* two headers */
    }
    em_model_free(a);
    em_model_free(b);
    expect_load(dup,
                "tensor model.layers.1.self_attn.k_proj.weight appears in more than one shard");
    char path[700];
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", sharded);
    remove(path);
    expect_load(sharded, "model-00002-of-00002.safetensors': No such file or directory");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MKMODEL\n", argv[0]);
        return 2;
    }
    char *root = scratch_dir();
    check_headers();
    check_checkpoint_errors(argv[1], root);
    check_shards(argv[1], root);
    scratch_remove(root);
    return test_finish();
}
