/* Loads a Hugging Face tokenizer.json holding a BPE model: byte-level (GPT-2, Llama 3, Qwen2:
 * a ByteLevel pre-tokenizer, with a Split whose pattern picks the rules) or SentencePiece-style
 * (Llama 2, TinyLlama, Mistral: "▁" for spaces through a normalizer or a Metaspace
 * pre-tokenizer; byte_fallback gives the byte tokens; merge order becomes the token scores).
 * model.vocab and model.merges ("a b" strings or ["a", "b"] pairs), added_tokens
 * (special ones become control tokens, the others user-defined ones) and the post-processor (a
 * TemplateProcessing that puts a special token before or after the text means add BOS or EOS).
 * A tokenizer_config.json beside the file, when present, has the last word on add_bos_token,
 * add_eos_token, bos_token and eos_token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "stages/tokenizer/tokenizer_impl.h"
#include "util/regular_file.h"

/* Parses JSON; a syntax error names its line and column. */
static em_status parse_json(const char *path, cJSON **out) {
    char *data;
    size_t len = 0;
    em_status err =
        em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a tokenizer JSON file", &data, &len);
    if (err) return err;
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(data, len, &end, false);
    if (!*out) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        int line = 1, col = 1;
        for (const char *p = data; at && p < at && p < data + len; p++) {
            if (*p == '\n')
                line++, col = 1;
            else
                col++;
        }
        free(data);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s:%d:%d: invalid JSON", path, line, col);
    }
    free(data);
    return NULL;
}

static em_status missing(const char *path, const char *key) {
    return em_error_new(EM_EXIT_BAD_INPUT, "%s: key '%s' is missing or has the wrong type", path,
                        key);
}

/* The expression one step of a byte-level pre_tokenizer applies (NULL: none), or an error. */
static em_status pre_step(const char *path, const cJSON *item, const char **expr,
                          bool *byte_level) {
    *expr = NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(item, "type");
    const char *name = cJSON_IsString(t) ? t->valuestring : "(none)";
    if (strcmp(name, "ByteLevel") == 0) {
        *byte_level = true;
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "add_prefix_space")))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: pre_tokenizer ByteLevel with add_prefix_space true is not "
                                "supported",
                                path);
        /* use_regex (true when absent): GPT-2's expression */
        if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(item, "use_regex")))
            *expr = EM_PRE_GPT2_HF_EXPR;
        return NULL;
    }
    if (strcmp(name, "Digits") == 0) {
        bool single = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "individual_digits"));
        *expr = single ? "\\p{N}" : "\\p{N}+";
        return NULL;
    }
    if (strcmp(name, "Split") == 0) {
        const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(item, "pattern");
        const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pattern, "Regex");
        const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(item, "behavior");
        if (!cJSON_IsString(regex)) return missing(path, "pre_tokenizer Split pattern.Regex");
        if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0 ||
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "invert")))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: pre_tokenizer Split must have behavior Isolated and invert "
                                "false",
                                path);
        *expr = regex->valuestring;
        return NULL;
    }
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "%s: pre_tokenizer type '%s' is not supported (ByteLevel, Split, Digits, "
                        "Sequence)",
                        path, name);
}

/* Picks the pre-tokenizer row whose expressions are those of the pre_tokenizer's steps (a
 * Sequence of Split, Digits and ByteLevel, or one of them); anything else is an error. */
static em_status read_pre_tokenizer(const char *path, const cJSON *root, em_tokenizer *tok) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!cJSON_IsObject(pre)) return missing(path, "pre_tokenizer");
    const cJSON *list = pre, *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    bool sequence = cJSON_IsString(type) && strcmp(type->valuestring, "Sequence") == 0;
    if (sequence) list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    if (sequence && !cJSON_IsArray(list)) return missing(path, "pre_tokenizer.pretokenizers");
    bool byte_level = false;
    const char *exprs[EM_PRE_MAX_EXPRS + 1];
    size_t n = 0;
    const cJSON *item = sequence ? list->child : pre;
    for (; item; item = sequence ? item->next : NULL) {
        const char *expr;
        em_status err = pre_step(path, item, &expr, &byte_level);
        if (err) return err;
        if (expr && n < EM_PRE_MAX_EXPRS + 1) exprs[n++] = expr;
    }
    if (!byte_level)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: not a byte-level BPE tokenizer (no ByteLevel pre_tokenizer); "
                            "only byte-level BPE tokenizer.json files are supported",
                            path);
    const em_pre_row *row = em_pre_find_hf(exprs, n);
    if (!row) {
        char *list_text = em_xasprintf("%s", "");
        for (size_t k = 0; k < n; k++) {
            char *next = em_xasprintf("%s%s'%s'", list_text, k ? ", then " : "", exprs[k]);
            free(list_text);
            list_text = next;
        }
        em_status err = em_error_new(EM_EXIT_BAD_INPUT,
                                     "%s: pre_tokenizer splits with %s, which is no pre-tokenizer "
                                     "llama.cpp knows",
                                     path, n ? list_text : "nothing");
        free(list_text);
        return err;
    }
    return em_tokenizer_use_pre_row(tok, row, path);
}

/* The id of a token given as "text" or {"content": "text"}; -1 when it is not in the vocab. */
static em_status token_ref(const char *path, const char *key, const cJSON *item,
                           const em_tokenizer *tok, int32_t *id) {
    if (cJSON_IsObject(item)) item = cJSON_GetObjectItemCaseSensitive(item, "content");
    if (!cJSON_IsString(item)) return missing(path, key);
    *id = em_text_map_find(&tok->vocab.by_text, item->valuestring, strlen(item->valuestring));
    if (*id < 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: %s '%s' is not a token of the vocabulary", path,
                            key, item->valuestring);
    return NULL;
}

/* TemplateProcessing (alone or inside a Sequence): a SpecialToken before "$A" in the single
 * template means add BOS, one after it means add EOS. */
static em_status read_post_processor(const char *path, const cJSON *root, em_tokenizer *tok) {
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(post, "type");
    if (!cJSON_IsString(type)) return NULL;
    if (strcmp(type->valuestring, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(post, "processors");
        const cJSON *p;
        cJSON_ArrayForEach(p, list) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
            if (cJSON_IsString(t) && strcmp(t->valuestring, "TemplateProcessing") == 0) post = p;
        }
    }
    type = cJSON_GetObjectItemCaseSensitive(post, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "TemplateProcessing") != 0) return NULL;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(post, "single");
    bool seen_text = false;
    const cJSON *piece;
    cJSON_ArrayForEach(piece, single) {
        if (cJSON_GetObjectItemCaseSensitive(piece, "Sequence")) {
            seen_text = true;
            continue;
        }
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(piece, "SpecialToken");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(special, "id");
        if (!cJSON_IsString(name)) continue;
        int32_t id;
        em_status err = token_ref(path, "post_processor special token", name, tok, &id);
        if (err) return err;
        if (seen_text)
            tok->eos = id, tok->add_eos = true;
        else
            tok->bos = id, tok->add_bos = true;
    }
    return NULL;
}

/* tokenizer_config.json beside the tokenizer: bos/eos tokens and add_bos/add_eos. */
static em_status read_config(const char *path, em_tokenizer *tok) {
    const char *slash = strrchr(path, '/');
    char *config_path = slash
                            ? em_xasprintf("%.*s/tokenizer_config.json", (int)(slash - path), path)
                            : em_xstrdup("tokenizer_config.json");
    if (access(config_path, F_OK) != 0) {
        free(config_path);
        return NULL;
    }
    cJSON *config = NULL;
    em_status err = parse_json(config_path, &config);
    const cJSON *item;
    if (!err && (item = cJSON_GetObjectItemCaseSensitive(config, "bos_token")) &&
        !cJSON_IsNull(item))
        err = token_ref(config_path, "bos_token", item, tok, &tok->bos);
    if (!err && (item = cJSON_GetObjectItemCaseSensitive(config, "eos_token")) &&
        !cJSON_IsNull(item))
        err = token_ref(config_path, "eos_token", item, tok, &tok->eos);
    if (!err && cJSON_IsBool(item = cJSON_GetObjectItemCaseSensitive(config, "add_bos_token")))
        tok->add_bos = cJSON_IsTrue(item);
    if (!err && cJSON_IsBool(item = cJSON_GetObjectItemCaseSensitive(config, "add_eos_token")))
        tok->add_eos = cJSON_IsTrue(item);
    cJSON_Delete(config);
    free(config_path);
    return err;
}

/* Collects the texts of model.vocab and added_tokens by id, with their types. */
static em_status read_vocab(const char *path, const cJSON *model, const cJSON *added,
                            em_tokenizer *tok) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return missing(path, "model.vocab");
    if (added && !cJSON_IsArray(added)) return missing(path, "added_tokens");
    /* Every id must be a small non-negative integer: find the largest first. */
    double max_id = -1;
    const cJSON *item;
    cJSON_ArrayForEach(item, vocab) {
        if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble >= INT32_MAX ||
            item->valuedouble != (double)(int32_t)item->valuedouble)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: model.vocab: token '%s' has an invalid id",
                                path, item->string);
        if (item->valuedouble > max_id) max_id = item->valuedouble;
    }
    cJSON_ArrayForEach(item, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(item, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || id->valuedouble < 0 ||
            id->valuedouble >= INT32_MAX || id->valuedouble != (double)(int32_t)id->valuedouble)
            return missing(path, "added_tokens[].id/content");
        if (id->valuedouble > max_id) max_id = id->valuedouble;
    }
    if (max_id < 0) return em_error_new(EM_EXIT_BAD_INPUT, "%s: model.vocab is empty", path);
    int32_t n = (int32_t)max_id + 1;
    em_bytes *texts = em_xcalloc((size_t)n, sizeof(em_bytes));
    uint8_t *types = em_xmalloc((size_t)n);
    memset(types, EM_TOKEN_NORMAL, (size_t)n);
    em_status err = NULL;
    cJSON_ArrayForEach(item, vocab) {
        int32_t id = item->valueint;
        if (texts[id].data && !err)
            err = em_error_new(EM_EXIT_BAD_INPUT, "%s: model.vocab: id %d is used by '%s' and '%s'",
                               path, id, texts[id].data, item->string);
        texts[id] = (em_bytes){item->string, (uint32_t)strlen(item->string)};
    }
    cJSON_ArrayForEach(item, added) {
        int32_t id = cJSON_GetObjectItemCaseSensitive(item, "id")->valueint;
        const char *content = cJSON_GetObjectItemCaseSensitive(item, "content")->valuestring;
        if (texts[id].data && strcmp(texts[id].data, content) != 0 && !err)
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "%s: added token %d '%s' conflicts with vocabulary token '%s'", path,
                               id, content, texts[id].data);
        const cJSON *strip_l = cJSON_GetObjectItemCaseSensitive(item, "lstrip");
        const cJSON *strip_r = cJSON_GetObjectItemCaseSensitive(item, "rstrip");
        if ((cJSON_IsTrue(strip_l) || cJSON_IsTrue(strip_r)) && !err)
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "%s: added token %d '%s' uses lstrip/rstrip, which is not supported",
                               path, id, content);
        texts[id] = (em_bytes){content, (uint32_t)strlen(content)};
        bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "special"));
        types[id] = special ? EM_TOKEN_CONTROL : EM_TOKEN_USER_DEFINED;
    }
    for (int32_t id = 0; id < n && !err; id++)
        if (!texts[id].data)
            err = em_error_new(EM_EXIT_BAD_INPUT, "%s: no token has id %d (ids must be 0 to %d)",
                               path, id, n - 1);
    if (!err) {
        em_vocab_init(&tok->vocab, n, texts);
        memcpy(tok->vocab.types, types, (size_t)n);
    }
    free(texts);
    free(types);
    return err;
}

static em_status read_merges(const char *path, const cJSON *model, em_tokenizer *tok) {
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsArray(merges)) return missing(path, "model.merges");
    em_merge_map_init(&tok->merges, (size_t)cJSON_GetArraySize(merges));
    size_t rank = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        em_status err;
        if (cJSON_IsString(m)) {
            err = em_bpe_add_merge_text(tok, path, rank, m->valuestring, strlen(m->valuestring));
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            const char *a = m->child->valuestring, *b = m->child->next->valuestring;
            err = em_bpe_add_merge_pair(tok, path, rank, a, strlen(a), b, strlen(b));
        } else {
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", path, rank);
        }
        if (err) return err;
        rank++;
    }
    return NULL;
}

/* SentencePiece-style tokenizer.json (Llama 2, TinyLlama, Mistral): spaces become "▁" through a
 * normalizer (Prepend "▁" and Replace " " with "▁") or a Metaspace pre-tokenizer. */
static bool is_metaspace(const cJSON *root) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "Metaspace") == 0) return true;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers"), *n;
    cJSON_ArrayForEach(n, list) {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (cJSON_IsString(content) && strcmp(content->valuestring, "\xE2\x96\x81") == 0)
            return true;
    }
    return false;
}

/* The SentencePiece setup: whether a "▁" goes before the text; anything else is an error. */
static em_status read_metaspace(const char *path, const cJSON *root, em_tokenizer *tok) {
    tok->family = &em_tokenizer_family_spm;
    tok->add_space_prefix = false;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    /* A Sequence of normalizers, or one. */
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers"), *n;
    for (n = list ? list->child : (norm && !cJSON_IsNull(norm) ? norm : NULL); n;
         n = list ? n->next : NULL) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(n, "type");
        const char *name = cJSON_IsString(type) ? type->valuestring : "(none)";
        const cJSON *prepend = cJSON_GetObjectItemCaseSensitive(n, "prepend");
        const cJSON *pattern = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (strcmp(name, "Prepend") == 0 && cJSON_IsString(prepend) &&
            strcmp(prepend->valuestring, "\xE2\x96\x81") == 0)
            tok->add_space_prefix = true;
        else if (!(strcmp(name, "Replace") == 0 && cJSON_IsString(pattern) &&
                   strcmp(pattern->valuestring, " ") == 0 && cJSON_IsString(content) &&
                   strcmp(content->valuestring, "\xE2\x96\x81") == 0))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: normalizer '%s' is not supported (SentencePiece-style files: "
                                "Prepend \"\xE2\x96\x81\" and Replace \" \" with it)",
                                path, name);
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (pre && !cJSON_IsNull(pre)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
        const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(pre, "prepend_scheme");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "Metaspace") != 0)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: a SentencePiece-style tokenizer.json needs no pre_tokenizer "
                                "or Metaspace",
                                path);
        tok->add_space_prefix = !cJSON_IsString(scheme) || strcmp(scheme->valuestring, "never");
    }
    return NULL;
}

/* SentencePiece merges by token score: a token made by merge number r scores -r (its first
 * merge), so the merge order of the file is kept; tokens no merge makes come last. */
static void scores_from_merges(em_tokenizer *tok) {
    for (int32_t id = 0; id < tok->vocab.n_tokens; id++) tok->vocab.scores[id] = -1e30f;
    for (size_t i = 0; i < tok->merges.capacity; i++) {
        const em_merge *m = &tok->merges.slots[i];
        if (m->key == UINT64_MAX) continue;
        float score = -(float)m->rank;
        if (score > tok->vocab.scores[m->result]) tok->vocab.scores[m->result] = score;
    }
    em_merge_map_free(&tok->merges);
}

/* Types the SentencePiece way: byte tokens <0xNN> (with byte_fallback) and the unknown token. */
static void spm_types(const cJSON *model, em_tokenizer *tok) {
    em_vocab *v = &tok->vocab;
    bool byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const em_bytes t = v->text[id];
        if (v->types[id] != EM_TOKEN_NORMAL) continue;
        if (byte_fallback && t.len == 6 && memcmp(t.data, "<0x", 3) == 0 && t.data[5] == '>')
            v->types[id] = EM_TOKEN_BYTE;
        if (cJSON_IsString(unk) && strcmp(t.data, unk->valuestring) == 0)
            v->types[id] = EM_TOKEN_UNKNOWN;
    }
}

static em_status build(const char *path, const cJSON *root, em_tokenizer *tok) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return missing(path, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsString(type)) return missing(path, "model.type");
    if (strcmp(type->valuestring, "BPE") != 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: model.type '%s' is not supported (only BPE)",
                            path, type->valuestring);
    tok->bos = tok->eos = tok->unk = -1;
    em_status err;
    if (is_metaspace(root)) {
        if ((err = read_metaspace(path, root, tok))) return err;
    } else {
        const cJSON *normalizer = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
        if (normalizer && !cJSON_IsNull(normalizer))
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: a normalizer is not supported (byte-level BPE has none)",
                                path);
        tok->family = &em_tokenizer_family_bpe;
        if ((err = read_pre_tokenizer(path, root, tok))) return err;
        tok->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    }
    if ((err =
             read_vocab(path, model, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), tok)))
        return err;
    if (tok->family->hex_byte_tokens) spm_types(model, tok);
    if ((err = em_tokenizer_finish(tok, path))) return err;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (unk && !cJSON_IsNull(unk) &&
        (err = token_ref(path, "model.unk_token", unk, tok, &tok->unk)))
        return err;
    if ((err = read_merges(path, model, tok))) return err;
    if (!tok->family->merges_by_rank) scores_from_merges(tok);
    if ((err = read_post_processor(path, root, tok))) return err;
    return read_config(path, tok);
}

em_status em_tokenizer_from_json(const char *path, em_tokenizer **out) {
    *out = NULL;
    cJSON *root;
    em_status err = parse_json(path, &root);
    if (err) return err;
    em_tokenizer *tok = em_xcalloc(1, sizeof(em_tokenizer));
    err = build(path, root, tok);
    cJSON_Delete(root);
    if (err) {
        em_tokenizer_free(tok);
        return err;
    }
    *out = tok;
    return NULL;
}
