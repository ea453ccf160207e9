/* The default byte-level vocabulary (see byte_vocab.h). */
#include "byte_vocab.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other bytes to
 * U+0100 and up, in byte order. */
static int byte_to_codepoint(int b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    if (printable) return b;
    int n = 0;
    for (int c = 0; c < b; c++) {
        bool p = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff);
        if (!p) n++;
    }
    return 256 + n;
}

static char *utf8(int cp) {
    char *s = em_xcalloc(4, 1);
    if (cp < 0x80) {
        s[0] = (char)cp;
    } else {
        s[0] = (char)(0xc0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3f));
    }
    return s;
}

byte_vocab byte_vocab_new(int n) {
    byte_vocab v = {em_xcalloc((size_t)n, sizeof(char *)), em_xcalloc((size_t)n, sizeof(int)), n};
    for (int i = 0; i < n; i++) {
        if (i < 256) {
            v.tokens[i] = utf8(byte_to_codepoint(i));
            v.types[i] = 1;
        } else {
            v.tokens[i] = i == 256   ? em_xstrdup("<s>")
                          : i == 257 ? em_xstrdup("</s>")
                                     : em_xasprintf("<pad_%d>", i);
            v.types[i] = 3;
        }
    }
    return v;
}

void byte_vocab_free(byte_vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->types);
}

void byte_vocab_write_gguf(const byte_vocab *v, gguf_writer *w) {
    gguf_kv_string(w, "tokenizer.ggml.model", "gpt2");
    gguf_kv_string(w, "tokenizer.ggml.pre", "default");
    gguf_kv_string_array(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, (size_t)v->n);
    int32_t *types = em_xmalloc((size_t)v->n * sizeof *types);
    for (int i = 0; i < v->n; i++) types[i] = v->types[i];
    gguf_kv_i32_array(w, "tokenizer.ggml.token_type", types, (size_t)v->n);
    free(types);
    gguf_kv_string_array(w, "tokenizer.ggml.merges", NULL, 0);
    gguf_kv_u32(w, "tokenizer.ggml.bos_token_id", 256);
    gguf_kv_u32(w, "tokenizer.ggml.eos_token_id", 257);
    gguf_kv_bool(w, "tokenizer.ggml.add_bos_token", true);
    gguf_kv_bool(w, "tokenizer.ggml.add_eos_token", false);
}

static bool write_json(cJSON *root, const char *path) {
    char *text = cJSON_Print(root);
    FILE *f = fopen(path, "w");
    bool ok = f && text && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    return ok;
}

bool byte_vocab_write_json(const byte_vocab *v, const char *dir) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int i = 256; i < v->n; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", i);
        cJSON_AddStringToObject(t, "content", v->tokens[i]);
        cJSON_AddBoolToObject(t, "single_word", false);
        cJSON_AddBoolToObject(t, "lstrip", false);
        cJSON_AddBoolToObject(t, "rstrip", false);
        cJSON_AddBoolToObject(t, "normalized", false);
        cJSON_AddBoolToObject(t, "special", true);
        cJSON_AddItemToArray(added, t);
    }
    cJSON_AddNullToObject(root, "normalizer");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "add_prefix_space", false);
    cJSON_AddBoolToObject(pre, "trim_offsets", true);
    cJSON_AddBoolToObject(pre, "use_regex", true);
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddBoolToObject(model, "ignore_merges", false);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int i = 0; i < v->n; i++) cJSON_AddNumberToObject(vocab, v->tokens[i], i);
    cJSON_AddArrayToObject(model, "merges");
    char *path = em_xasprintf("%s/tokenizer.json", dir);
    bool ok = write_json(root, path);
    free(path);
    cJSON_Delete(root);

    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddBoolToObject(cfg, "add_bos_token", true);
    cJSON_AddBoolToObject(cfg, "add_eos_token", false);
    cJSON_AddStringToObject(cfg, "bos_token", "<s>");
    cJSON_AddStringToObject(cfg, "eos_token", "</s>");
    cJSON_AddStringToObject(cfg, "tokenizer_class", "PreTrainedTokenizerFast");
    path = em_xasprintf("%s/tokenizer_config.json", dir);
    ok = write_json(cfg, path) && ok;
    free(path);
    cJSON_Delete(cfg);
    return ok;
}
