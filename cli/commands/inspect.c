/* `evalmesh inspect MODEL [--json]`: what a model file holds, as evalmesh reads it: format,
 * architecture, every hyperparameter (after defaults), the tokenizer, a GGUF's metadata, the
 * tensor table and its count by type, the file size, the SHA-256 of the header (to pin a model
 * in a recipe's `header_sha256:`), the digest of its contents (what results, resume and history
 * identify it by, loaded_model.h), whether evalmesh can run it, and the first non-finite weight
 * (finite_check.h), which makes the exit status 2. Any well-formed GGUF is
 * described, runnable or not (gguf_runnable.h says why not); hyperparameters and tokenizer are
 * shown for the files the strict loader accepts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/json_out.h"
#include "cli/options.h"
#include "util/log.h"
#include "util/sha256.h"
#include "stages/formats/ggml_types.h"
#include "stages/model/finite_check.h"
#include "stages/model/gguf_runnable.h"
#include "stages/model/loaded_model.h"
#include "stages/model/rope_scaling.h"
#include "stages/tokenizer/tokenizer.h"

static const char usage[] =
    "usage: evalmesh inspect MODEL [--json]\n"
    "\n"
    "Prints what MODEL (a GGUF file, a .safetensors file or a Hugging Face checkpoint\n"
    "directory) holds: format, architecture, hyperparameters, tokenizer, tensors (name, type,\n"
    "shape with the innermost dimension first, bytes), the count of tensors by type, file size,\n"
    "header SHA-256 and digest (XXH3-128 of every byte read, tensor data included: what\n"
    "results, --resume and history identify the model by); for a GGUF file also its metadata\n"
    "keys. The last line says whether evalmesh can run the model: `runnable: yes`, or\n"
    "`runnable: no: REASON; REASON...` with one reason per problem (unsupported architecture,\n"
    "tensor type, pre-tokenizer, no tensors...).\n"
    "Any well-formed GGUF is described, runnable or not; hyperparameters and tokenizer are shown\n"
    "when it is runnable.\n"
    "--json prints the same as one JSON object.\n"
    "\n"
    "Every weight is turned into floats and looked at: the first NaN or infinite value is\n"
    "named (tensor, type, block, row) after the description.\n"
    "\n"
    "Exit statuses: 0 the file was described (even when evalmesh cannot run it), 2 the file\n"
    "cannot be read as a model (a malformed GGUF, a bad checkpoint: the message says why) or a\n"
    "weight is NaN or infinite.\n";

static void shape_text(const em_tensor *t, char *buf, size_t size) {
    size_t used = 0;
    for (int d = 0; d < t->n_dims && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? " x " : "",
                                 (long long)t->shape[d]);
}

/* What is described: the strict loader's model (NULL when it refused the file), the parsed GGUF
 * (NULL for other formats), the tensor rows of either, and why the file cannot run. */
typedef struct description {
    const char *path;
    em_model *m;
    em_gguf *g;
    em_tensor *tensors; /* tensor_count rows: m's, or views of g's tensor infos */
    size_t tensor_count;
    em_gguf_reasons reasons;
    char architecture[64];
    char header_sha256[65];
    char digest[EM_DIGEST_HEX];
} description;

static void print_hyperparameters(const em_model *m) {
    const em_llama_config *c = &m->config;
    printf("\nhyperparameters:\n");
    printf("  vocab_size          %d\n", c->n_vocab);
    printf("  context_length      %d\n", c->n_ctx_train);
    printf("  embedding_length    %d\n", c->dim);
    printf("  block_count         %d\n", c->n_layers);
    printf("  feed_forward_length %d\n", c->ffn_dim);
    printf("  head_count          %d\n", c->n_heads);
    printf("  head_count_kv       %d\n", c->n_kv_heads);
    printf("  head_dim            %d\n", c->head_dim);
    printf("  rope_dimension      %d\n", c->rope_dim);
    printf("  rope_freq_base      %g\n", c->rope_freq_base);
    const em_rope_scaling_kind *scaling = em_rope_scaling_of(c->rope_scaling);
    const char *names[EM_ROPE_SCALING_MAX_PARAMS];
    double values[EM_ROPE_SCALING_MAX_PARAMS];
    int n_params = scaling->params(c, names, values);
    printf("  rope_scaling        %s", scaling->name);
    for (int i = 0; i < n_params; i++)
        printf("%s%s %g%s", i ? ", " : " (", names[i], values[i], i + 1 < n_params ? "" : ")");
    printf("\n  rope_freqs          %s\n",
           m->rope_freqs ? "rope_freqs.weight (frequency factors)" : "none");
    printf("  rms_epsilon         %g\n", c->rms_eps);
    printf("  qkv_bias            %s\n", c->has_qkv_bias ? "yes" : "no");
    printf("  tied_output         %s\n", c->tied_output ? "yes" : "no");
    printf("\ntokenizer: ");
    const em_tokenizer *tok = m->tokenizer;
    if (!tok) {
        printf("none\n");
    } else {
        int32_t bos = em_tokenizer_bos(tok), eos = em_tokenizer_eos(tok);
        printf("%s, %d tokens, bos %d", em_tokenizer_kind(tok), em_tokenizer_vocab_size(tok), bos);
        if (bos >= 0) printf(" \"%s\"", em_tokenizer_token_text(tok, bos));
        printf(", eos %d", eos);
        if (eos >= 0) printf(" \"%s\"", em_tokenizer_token_text(tok, eos));
        printf("\n");
    }
}

/* A metadata value on one line: scalars as they are, strings quoted (escaped, the first 60
 * bytes), arrays as their element type and count. */
static void value_text(const em_gguf_value *v, char *buf, size_t size) {
    switch (v->type) {
    case EM_GGUF_INT8:
    case EM_GGUF_INT16:
    case EM_GGUF_INT32:
    case EM_GGUF_INT64:
        snprintf(buf, size, "%lld", (long long)v->i64);
        break;
    case EM_GGUF_FLOAT32:
    case EM_GGUF_FLOAT64:
        snprintf(buf, size, "%g", v->f64);
        break;
    case EM_GGUF_BOOL:
        snprintf(buf, size, "%s", v->u64 ? "true" : "false");
        break;
    case EM_GGUF_ARRAY:
        snprintf(buf, size, "[%llu x %s]", (unsigned long long)v->arr.count,
                 em_gguf_type_name(v->arr.elem_type));
        break;
    case EM_GGUF_STRING: {
        size_t used = 0;
        buf[used++] = '"';
        for (uint64_t i = 0; i < v->str.len && i < 60 && used + 5 < size; i++) {
            unsigned char ch = (unsigned char)v->str.data[i];
            if (ch == '\n' || ch == '"' || ch == '\\' || ch == '\t')
                used += (size_t)snprintf(buf + used, size - used, "\\%c",
                                         ch == '\n'   ? 'n'
                                         : ch == '\t' ? 't'
                                                      : ch);
            else if (ch < 0x20)
                used += (size_t)snprintf(buf + used, size - used, "\\x%02x", ch);
            else
                buf[used++] = (char)ch;
        }
        buf[used++] = '"';
        buf[used] = '\0';
        if (v->str.len > 60)
            snprintf(buf + used, size - used, "... (%llu bytes)", (unsigned long long)v->str.len);
        break;
    }
    default:
        snprintf(buf, size, "%llu", (unsigned long long)v->u64);
        break;
    }
}

/* Tensor counts by ggml type id (ids the GGUF reader accepts are below 64). */
enum { MAX_TYPE_ID = 64 };
static void count_types(const description *d, size_t counts[MAX_TYPE_ID]) {
    memset(counts, 0, MAX_TYPE_ID * sizeof *counts);
    for (size_t i = 0; i < d->tensor_count; i++)
        if ((unsigned)d->tensors[i].type < MAX_TYPE_ID) counts[d->tensors[i].type]++;
}

static void print_text(const description *d) {
    printf("model:        %s\n", d->path);
    printf("format:       %s\n", d->m ? d->m->format : "gguf");
    printf("architecture: %s\n", d->architecture);
    printf("file size:    %llu bytes\n",
           (unsigned long long)(d->m ? d->m->file_size : d->g->map_size));
    printf("header sha256: %s\n", d->header_sha256);
    printf("digest:       %s\n", d->digest);
    if (d->m) print_hyperparameters(d->m);
    if (d->g) {
        printf("\nmetadata: %llu keys\n", (unsigned long long)d->g->kv_count);
        for (uint64_t i = 0; i < d->g->kv_count; i++) {
            char value[160];
            value_text(&d->g->kvs[i].value, value, sizeof value);
            printf("  %-40s %s\n", d->g->kvs[i].key, value);
        }
    }
    printf("\ntensors: %zu\n", d->tensor_count);
    size_t total = 0;
    for (size_t i = 0; i < d->tensor_count; i++) {
        const em_tensor *t = &d->tensors[i];
        char shape[96];
        shape_text(t, shape, sizeof shape);
        printf("  %-32s %-5s %-18s %12zu\n", t->name, em_tensor_type_name(t->type), shape,
               t->nbytes);
        total += t->nbytes;
    }
    printf("  %-32s %-5s %-18s %12zu\n", "total", "", "", total);
    size_t counts[MAX_TYPE_ID];
    count_types(d, counts);
    printf("\ntensors by type:");
    for (int type = 0; type < MAX_TYPE_ID; type++)
        if (counts[type]) printf(" %s %zu", em_tensor_type_name(type), counts[type]);
    printf("%s\n", d->tensor_count ? "" : " none");
    if (d->reasons.count == 0) {
        printf("runnable: yes\n");
        return;
    }
    printf("runnable: no: ");
    for (size_t i = 0; i < d->reasons.count; i++)
        printf("%s%s", i ? "; " : "", d->reasons.items[i]);
    printf("\n");
}

static void json_hyperparameters(cJSON *root, const em_model *m) {
    const em_llama_config *c = &m->config;
    cJSON *h = cJSON_AddObjectToObject(root, "hyperparameters");
    cJSON_AddNumberToObject(h, "vocab_size", c->n_vocab);
    cJSON_AddNumberToObject(h, "context_length", c->n_ctx_train);
    cJSON_AddNumberToObject(h, "embedding_length", c->dim);
    cJSON_AddNumberToObject(h, "block_count", c->n_layers);
    cJSON_AddNumberToObject(h, "feed_forward_length", c->ffn_dim);
    cJSON_AddNumberToObject(h, "head_count", c->n_heads);
    cJSON_AddNumberToObject(h, "head_count_kv", c->n_kv_heads);
    cJSON_AddNumberToObject(h, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(h, "rope_dimension", c->rope_dim);
    cJSON_AddNumberToObject(h, "rope_freq_base", c->rope_freq_base);
    const em_rope_scaling_kind *scaling = em_rope_scaling_of(c->rope_scaling);
    cJSON_AddStringToObject(h, "rope_scaling", scaling->name);
    cJSON_AddNumberToObject(h, "rope_freq_scale", c->rope_freq_scale);
    const char *names[EM_ROPE_SCALING_MAX_PARAMS];
    double values[EM_ROPE_SCALING_MAX_PARAMS];
    int n_params = scaling->params(c, names, values);
    for (int i = 0; i < n_params; i++) {
        if (strcmp(names[i], "freq_scale") == 0) continue; /* rope_freq_scale, always there */
        char key[64];
        snprintf(key, sizeof key, "rope_%s", names[i]);
        cJSON_AddNumberToObject(h, key, values[i]);
    }
    cJSON_AddBoolToObject(h, "rope_freqs_tensor", m->rope_freqs != NULL);
    cJSON_AddNumberToObject(h, "rms_epsilon", c->rms_eps);
    cJSON_AddBoolToObject(h, "qkv_bias", c->has_qkv_bias);
    cJSON_AddBoolToObject(h, "tied_output", c->tied_output);
    if (m->tokenizer) {
        cJSON *t = cJSON_AddObjectToObject(root, "tokenizer");
        cJSON_AddStringToObject(t, "kind", em_tokenizer_kind(m->tokenizer));
        cJSON_AddNumberToObject(t, "vocab_size", em_tokenizer_vocab_size(m->tokenizer));
        cJSON_AddNumberToObject(t, "bos", em_tokenizer_bos(m->tokenizer));
        cJSON_AddNumberToObject(t, "eos", em_tokenizer_eos(m->tokenizer));
    } else {
        cJSON_AddNullToObject(root, "tokenizer");
    }
}

/* Metadata as JSON: scalars and strings as they are, arrays as {"array": type, "count": n}. */
static cJSON *json_value(const em_gguf_value *v) {
    switch (v->type) {
    case EM_GGUF_INT8:
    case EM_GGUF_INT16:
    case EM_GGUF_INT32:
    case EM_GGUF_INT64:
        return cJSON_CreateNumber((double)v->i64);
    case EM_GGUF_FLOAT32:
    case EM_GGUF_FLOAT64:
        return cJSON_CreateNumber(v->f64);
    case EM_GGUF_BOOL:
        return cJSON_CreateBool(v->u64 != 0);
    case EM_GGUF_STRING: {
        char *text = em_xasprintf("%.*s", (int)v->str.len, v->str.data);
        cJSON *s = cJSON_CreateString(text);
        free(text);
        return s;
    }
    case EM_GGUF_ARRAY: {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "array", em_gguf_type_name(v->arr.elem_type));
        cJSON_AddNumberToObject(a, "count", (double)v->arr.count);
        return a;
    }
    default:
        return cJSON_CreateNumber((double)v->u64);
    }
}

static void print_json(const description *d) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "path", d->path);
    cJSON_AddStringToObject(root, "format", d->m ? d->m->format : "gguf");
    cJSON_AddStringToObject(root, "architecture", d->architecture);
    cJSON_AddNumberToObject(root, "file_size", (double)(d->m ? d->m->file_size : d->g->map_size));
    cJSON_AddStringToObject(root, "header_sha256", d->header_sha256);
    cJSON_AddStringToObject(root, "digest", d->digest);
    if (d->m) {
        json_hyperparameters(root, d->m);
    } else {
        cJSON_AddNullToObject(root, "hyperparameters");
        cJSON_AddNullToObject(root, "tokenizer");
    }
    if (d->g) {
        cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
        for (uint64_t i = 0; i < d->g->kv_count; i++)
            cJSON_AddItemToObject(meta, d->g->kvs[i].key, json_value(&d->g->kvs[i].value));
    }
    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (size_t i = 0; i < d->tensor_count; i++) {
        const em_tensor *t = &d->tensors[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "type", em_tensor_type_name(t->type));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int k = 0; k < t->n_dims; k++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[k]));
        cJSON_AddNumberToObject(e, "bytes", (double)t->nbytes);
        cJSON_AddItemToArray(tensors, e);
    }
    size_t counts[MAX_TYPE_ID];
    count_types(d, counts);
    cJSON *by_type = cJSON_AddObjectToObject(root, "tensors_by_type");
    for (int type = 0; type < MAX_TYPE_ID; type++)
        if (counts[type])
            cJSON_AddNumberToObject(by_type, em_tensor_type_name(type), (double)counts[type]);
    cJSON_AddBoolToObject(root, "runnable", d->reasons.count == 0);
    cJSON *reasons = cJSON_AddArrayToObject(root, "reasons");
    for (size_t i = 0; i < d->reasons.count; i++)
        cJSON_AddItemToArray(reasons, cJSON_CreateString(d->reasons.items[i]));
    em_print_json(root);
}

/* Fills d from path: the strict load, and for a GGUF file its parsed header whether or not the
 * load succeeded. An error (the file cannot be read as a model) when neither describes it. */
static em_status describe(const char *path, description *d) {
    *d = (description){.path = path};
    em_status load_err = em_model_load(path, &d->m);
    if (em_path_is_gguf(path)) {
        em_status err = em_gguf_open(path, &d->g);
        if (err) {
            em_error_free(load_err);
            return err;
        }
        d->reasons = em_gguf_runnable_reasons(d->g, load_err);
        em_error_free(load_err);
    } else if (load_err) {
        return load_err;
    }
    if (d->m) {
        snprintf(d->architecture, sizeof d->architecture, "%s", d->m->config.architecture);
        memcpy(d->header_sha256, d->m->header_sha256, sizeof d->header_sha256);
        memcpy(d->digest, d->m->digest, sizeof d->digest);
        d->tensors = d->m->tensors;
        d->tensor_count = d->m->tensor_count;
        return NULL;
    }
    const em_gguf *g = d->g;
    em_gguf_string arch;
    bool found = false;
    em_error_free(em_gguf_get_string(g, "general.architecture", &arch, &found));
    if (found)
        snprintf(d->architecture, sizeof d->architecture, "%.*s",
                 (int)(arch.len > 63 ? 63 : arch.len), arch.data);
    else
        snprintf(d->architecture, sizeof d->architecture, "none");
    em_sha256_hex(g->map, g->data_offset < g->map_size ? g->data_offset : g->map_size,
                  d->header_sha256);
    em_content_digest_hex(g->map, g->map_size, d->digest);
    d->tensor_count = g->tensor_count;
    d->tensors = em_xcalloc(g->tensor_count ? g->tensor_count : 1, sizeof *d->tensors);
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        const em_gguf_tensor_info *ti = &g->tensors[i];
        em_tensor *t = &d->tensors[i];
        t->name = ti->name;
        t->type = (em_tensor_type)ti->type;
        t->n_dims = (int)ti->n_dims;
        memcpy(t->shape, ti->shape, sizeof t->shape);
        t->nbytes = ti->nbytes;
        t->data = ti->data;
    }
    return NULL;
}

static void description_free(description *d) {
    if (!d->m) free(d->tensors);
    em_model_free(d->m);
    if (d->g) em_gguf_close(d->g);
    em_gguf_reasons_free(&d->reasons);
}

static int inspect_main(int argc, char **argv) {
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {0},
    };
    bool json = false;
    int c;
    while ((c = em_cli_option("inspect", argc, argv, "", options)) != -1) {
        if (c != 'j') return EM_EXIT_BAD_INPUT;
        json = true;
    }
    if (optind >= argc) {
        em_log_error("evalmesh inspect: missing MODEL (see evalmesh inspect --help)");
        return EM_EXIT_BAD_INPUT;
    }
    if (optind + 1 < argc) return em_cli_unexpected("inspect", argv[optind + 1]);
    const char *path = argv[optind];
    description d;
    em_status err = describe(path, &d);
    if (err) {
        em_log_error("%s", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    if (json)
        print_json(&d);
    else
        print_text(&d);
    err = em_tensors_check_finite(d.tensors, d.tensor_count, EM_EXIT_BAD_INPUT);
    description_free(&d);
    if (err) {
        em_log_error("%s: %s", path, err->message);
        em_error_free(err);
        return EM_EXIT_BAD_INPUT;
    }
    return EM_EXIT_OK;
}

const em_command em_command_inspect = {
    .name = "inspect",
    .summary = "describe a model file and say whether evalmesh can run it",
    .usage = usage,
    .main = inspect_main,
};
