/* Builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata: model ("llama" or "gpt2"), pre,
 * tokens, scores, token_type, merges, bos/eos/unknown_token_id, add_bos_token, add_eos_token,
 * add_space_prefix. Defaults when a key is absent are llama.cpp's. Everything is copied, so the
 * GGUF file may be closed afterwards. */
#include <stdlib.h>
#include <string.h>

#include "stages/formats/gguf.h"
#include "stages/tokenizer/tokenizer_impl.h"

/* The array under key (NULL when absent), checked to hold `count` elements of type `type`
 * (count 0: any count). */
static em_status get_array(const em_gguf *g, const char *key, em_gguf_type type, uint64_t count,
                           const em_gguf_value **out) {
    *out = NULL;
    const em_gguf_kv *kv = em_gguf_find(g, key);
    if (!kv) return NULL;
    if (kv->value.type != EM_GGUF_ARRAY || kv->value.arr.elem_type != type)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: metadata key '%s' must be an array of %s",
                            g->path, key, em_gguf_type_name(type));
    if (count && kv->value.arr.count != count)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: metadata key '%s' has %llu entries, expected %llu (one per "
                            "token)",
                            g->path, key, (unsigned long long)kv->value.arr.count,
                            (unsigned long long)count);
    *out = &kv->value;
    return NULL;
}

/* A token id key: *id is left alone when the key is absent; 2^32-1 (as uint32 -1) means none. */
static em_status get_id(const em_gguf *g, const char *key, int32_t *id) {
    uint64_t v;
    bool found;
    em_status err = em_gguf_get_u64(g, key, &v, &found);
    if (err || !found) return err;
    if (v == UINT32_MAX || v == UINT64_MAX)
        *id = -1;
    else if (v > INT32_MAX)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: %s %llu is out of range", g->path, key,
                            (unsigned long long)v);
    else
        *id = (int32_t)v;
    return NULL;
}

static em_status get_flag(const em_gguf *g, const char *key, bool *flag) {
    bool v, found;
    em_status err = em_gguf_get_bool(g, key, &v, &found);
    if (!err && found) *flag = v;
    return err;
}

/* Picks the pre-tokenizer row of tokenizer.ggml.pre (absent: "default", as llama.cpp does) and
 * applies llama.cpp's settings for that name. */
static em_status read_pre(const em_gguf *g, em_tokenizer *tok) {
    em_gguf_string pre;
    bool found;
    em_status err = em_gguf_get_string(g, "tokenizer.ggml.pre", &pre, &found);
    if (err || !tok->family->pre_tokenized) return err;
    if (!found) return em_tokenizer_use_pre_row(tok, em_pre_default_row(), g->path);
    const em_pre_name *name = em_pre_find_name(pre.data, pre.len);
    if (!name)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: tokenizer.ggml.pre '%.*s' is not a pre-tokenizer llama.cpp "
                            "knows (the closest known one is '%s')",
                            g->path, (int)pre.len, pre.data,
                            em_pre_closest_name(pre.data, pre.len));
    if (name->unsupported)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: tokenizer.ggml.pre '%s' is not supported: %s",
                            g->path, name->name, name->unsupported);
    tok->ignore_merges = name->settings & EM_PRE_IGNORE_MERGES;
    if (name->settings & EM_PRE_ADD_BOS) tok->add_bos = true;
    if (name->settings & EM_PRE_NO_BOS) tok->bos = -1;
    return em_tokenizer_use_pre_row(tok, name->row, g->path);
}

static em_status build(const em_gguf *g, em_tokenizer *tok) {
    const char *path = g->path;
    em_gguf_string model;
    bool found;
    em_status err = em_gguf_get_string(g, "tokenizer.ggml.model", &model, &found);
    if (err) return err;
    if (!found)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: metadata key 'tokenizer.ggml.model' is missing (no tokenizer "
                            "in this file)",
                            path);
    tok->family = em_tokenizer_family_named(model.data, model.len);
    if (!tok->family)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: tokenizer.ggml.model '%.*s' is not supported (supported: %s)",
                            path, (int)model.len, model.data, em_tokenizer_family_names());
    tok->bos = tok->family->default_bos;
    tok->eos = tok->family->default_eos;
    tok->unk = tok->family->default_unk;
    tok->add_bos = tok->family->default_add_bos;
    tok->add_space_prefix = tok->family->default_add_space_prefix;
    if ((err = read_pre(g, tok))) return err;

    const em_gguf_value *tokens, *scores, *types, *merges;
    if ((err = get_array(g, "tokenizer.ggml.tokens", EM_GGUF_STRING, 0, &tokens))) return err;
    if (!tokens)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: metadata key 'tokenizer.ggml.tokens' is missing", path);
    uint64_t n = tokens->arr.count;
    if (n == 0 || n > INT32_MAX)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: tokenizer.ggml.tokens has %llu entries", path,
                            (unsigned long long)n);
    if ((err = get_array(g, "tokenizer.ggml.scores", EM_GGUF_FLOAT32, n, &scores))) return err;
    if ((err = get_array(g, "tokenizer.ggml.token_type", EM_GGUF_INT32, n, &types))) return err;
    if ((err = get_array(g, "tokenizer.ggml.merges", EM_GGUF_STRING, 0, &merges))) return err;
    if (tok->family->merges_by_rank && !merges)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: metadata key 'tokenizer.ggml.merges' is missing (a %s "
                            "tokenizer needs its merges)",
                            path, tok->family->name);

    em_bytes *texts = em_xmalloc(n * sizeof(em_bytes));
    for (uint64_t i = 0; i < n; i++) {
        if (tokens->arr.strings[i].len > UINT32_MAX / 2) {
            free(texts);
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: token %llu is too long", path,
                                (unsigned long long)i);
        }
        texts[i] = (em_bytes){tokens->arr.strings[i].data, (uint32_t)tokens->arr.strings[i].len};
    }
    em_vocab_init(&tok->vocab, (int32_t)n, texts);
    free(texts);
    for (uint64_t i = 0; i < n; i++) {
        if (scores) memcpy(&tok->vocab.scores[i], (const char *)scores->arr.data + 4 * i, 4);
        if (types) {
            int32_t t;
            memcpy(&t, (const char *)types->arr.data + 4 * i, 4);
            if (t < EM_TOKEN_UNDEFINED || t > EM_TOKEN_BYTE)
                return em_error_new(EM_EXIT_BAD_INPUT,
                                    "%s: tokenizer.ggml.token_type of token %llu is %d (valid: "
                                    "0 to 6)",
                                    path, (unsigned long long)i, t);
            tok->vocab.types[i] = (uint8_t)t;
        }
    }
    if ((err = get_id(g, "tokenizer.ggml.bos_token_id", &tok->bos))) return err;
    if ((err = get_id(g, "tokenizer.ggml.eos_token_id", &tok->eos))) return err;
    if ((err = get_id(g, "tokenizer.ggml.unknown_token_id", &tok->unk))) return err;
    if ((err = get_flag(g, "tokenizer.ggml.add_bos_token", &tok->add_bos))) return err;
    if ((err = get_flag(g, "tokenizer.ggml.add_eos_token", &tok->add_eos))) return err;
    if ((err = get_flag(g, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix))) return err;
    if (!tok->family->space_prefix) tok->add_space_prefix = false;
    if ((err = em_tokenizer_finish(tok, path))) return err;

    if (merges) {
        char *source = em_xasprintf("%s: tokenizer.ggml.merges", path);
        em_merge_map_init(&tok->merges, merges->arr.count);
        for (uint64_t i = 0; i < merges->arr.count && !err; i++) {
            em_gguf_string m = merges->arr.strings[i];
            err = em_bpe_add_merge_text(tok, source, i, m.data, m.len);
        }
        free(source);
        if (err) return err;
    }
    return NULL;
}

em_status em_tokenizer_from_gguf(const struct em_gguf *gguf, em_tokenizer **out) {
    em_tokenizer *tok = em_xcalloc(1, sizeof(em_tokenizer));
    em_status err = build(gguf, tok);
    if (err) {
        em_tokenizer_free(tok);
        *out = NULL;
        return err;
    }
    *out = tok;
    return NULL;
}
