/* `evalmesh inspect MODEL [--json]`: what a model file holds, as evalmesh reads it: format,
 * architecture, every hyperparameter (after defaults), the tokenizer, the tensor table, the file
 * size and the SHA-256 of the header (to pin a model in a recipe's `header_sha256:`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/json_out.h"
#include "cli/options.h"
#include "util/log.h"
#include "stages/model/loaded_model.h"
#include "stages/tokenizer/tokenizer.h"

static const char usage[] =
    "usage: evalmesh inspect MODEL [--json]\n"
    "\n"
    "Prints what MODEL (a GGUF file, a .safetensors file or a Hugging Face checkpoint\n"
    "directory) holds: format, architecture, hyperparameters, tokenizer, tensors (name, type,\n"
    "shape with the innermost dimension first, bytes), file size and header SHA-256.\n"
    "--json prints the same as one JSON object.\n"
    "\n"
    "Exit statuses: 0 ok, 2 the file cannot be read as a model (the message says why).\n";

static const char *rope_scaling_name(em_rope_scaling s) {
    return s == EM_ROPE_SCALING_LINEAR ? "linear" : s == EM_ROPE_SCALING_LLAMA3 ? "llama3" : "none";
}

static void shape_text(const em_tensor *t, char *buf, size_t size) {
    size_t used = 0;
    for (int d = 0; d < t->n_dims && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? " x " : "",
                                 (long long)t->shape[d]);
}

static void print_text(const em_model *m) {
    const em_llama_config *c = &m->config;
    printf("model:        %s\n", m->path);
    printf("format:       %s\n", m->format);
    printf("architecture: %s\n", c->architecture);
    printf("file size:    %llu bytes\n", (unsigned long long)m->file_size);
    printf("header sha256: %s\n", m->header_sha256);
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
    printf("  rope_scaling        %s", rope_scaling_name(c->rope_scaling));
    if (c->rope_scaling == EM_ROPE_SCALING_LINEAR) printf(" (freq_scale %g)", c->rope_freq_scale);
    if (c->rope_scaling == EM_ROPE_SCALING_LLAMA3)
        printf(" (factor %g, low_freq_factor %g, high_freq_factor %g, original_context %d)",
               c->rope_llama3_factor, c->rope_llama3_low_freq_factor,
               c->rope_llama3_high_freq_factor, c->rope_llama3_original_ctx);
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
    printf("\ntensors: %zu\n", m->tensor_count);
    size_t total = 0;
    for (size_t i = 0; i < m->tensor_count; i++) {
        const em_tensor *t = &m->tensors[i];
        char shape[96];
        shape_text(t, shape, sizeof shape);
        printf("  %-32s %-5s %-18s %12zu\n", t->name, em_tensor_type_name(t->type), shape,
               t->nbytes);
        total += t->nbytes;
    }
    printf("  %-32s %-5s %-18s %12zu\n", "total", "", "", total);
}

static void print_json(const em_model *m) {
    const em_llama_config *c = &m->config;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "path", m->path);
    cJSON_AddStringToObject(root, "format", m->format);
    cJSON_AddStringToObject(root, "architecture", c->architecture);
    cJSON_AddNumberToObject(root, "file_size", (double)m->file_size);
    cJSON_AddStringToObject(root, "header_sha256", m->header_sha256);
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
    cJSON_AddStringToObject(h, "rope_scaling", rope_scaling_name(c->rope_scaling));
    cJSON_AddNumberToObject(h, "rope_freq_scale", c->rope_freq_scale);
    if (c->rope_scaling == EM_ROPE_SCALING_LLAMA3) {
        cJSON_AddNumberToObject(h, "rope_llama3_factor", c->rope_llama3_factor);
        cJSON_AddNumberToObject(h, "rope_llama3_low_freq_factor", c->rope_llama3_low_freq_factor);
        cJSON_AddNumberToObject(h, "rope_llama3_high_freq_factor", c->rope_llama3_high_freq_factor);
        cJSON_AddNumberToObject(h, "rope_llama3_original_context", c->rope_llama3_original_ctx);
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
    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (size_t i = 0; i < m->tensor_count; i++) {
        const em_tensor *t = &m->tensors[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "type", em_tensor_type_name(t->type));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->n_dims; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddNumberToObject(e, "bytes", (double)t->nbytes);
        cJSON_AddItemToArray(tensors, e);
    }
    em_print_json(root);
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
    em_model *m;
    em_status err = em_model_load(path, &m);
    if (err) {
        em_log_error("%s", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    if (json)
        print_json(m);
    else
        print_text(m);
    em_model_free(m);
    return EM_EXIT_OK;
}

const em_command em_command_inspect = {
    .name = "inspect",
    .summary = "show a model file's architecture, hyperparameters, tokenizer and tensors",
    .usage = usage,
    .main = inspect_main,
};
