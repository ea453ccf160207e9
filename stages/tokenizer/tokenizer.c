/* The public tokenizer API: loading dispatch, encoding (UTF-8 check, special tokens, BOS/EOS,
 * then the family's algorithm on each stretch of plain text), decoding and accessors. */
#include "stages/tokenizer/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stages/formats/gguf.h"
#include "stages/tokenizer/pretokenizer.h"
#include "stages/tokenizer/tokenizer_impl.h"
#include "util/mapped_file.h"
#include "util/utf8.h"

void em_vocab_init(em_vocab *vocab, int32_t n, const em_bytes *texts) {
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += texts[i].len + 1;
    memset(vocab, 0, sizeof(*vocab));
    vocab->n_tokens = n;
    vocab->text = em_xcalloc((size_t)n + 1, sizeof(em_bytes));
    vocab->pieces = em_xcalloc((size_t)n + 1, sizeof(em_bytes));
    vocab->scores = em_xcalloc((size_t)n + 1, sizeof(float));
    vocab->types = em_xmalloc((size_t)n + 1);
    /* NUL-terminated texts first, then room for the pieces: a piece is never longer than its
     * text. */
    vocab->storage = em_xmalloc(2 * total + 1);
    size_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        memcpy(vocab->storage + at, texts[i].data, texts[i].len);
        vocab->storage[at + texts[i].len] = 0;
        vocab->text[i] = (em_bytes){vocab->storage + at, texts[i].len};
        vocab->pieces[i] = (em_bytes){vocab->storage + total + at, 0};
        vocab->types[i] = EM_TOKEN_NORMAL;
        at += texts[i].len + 1;
    }
}

/* A special token's sort key: first byte, then longest first, then lowest id. */
typedef struct special_key {
    uint8_t first;
    uint32_t len;
    int32_t id;
} special_key;

static int special_order(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : 1;
}

static bool is_special_type(uint8_t type) {
    return type == EM_TOKEN_CONTROL || type == EM_TOKEN_USER_DEFINED || type == EM_TOKEN_UNKNOWN;
}

em_status em_tokenizer_finish(em_tokenizer *tok, const char *source) {
    em_vocab *v = &tok->vocab;
    const int32_t *ids[] = {&tok->bos, &tok->eos, &tok->unk};
    const char *names[] = {"BOS", "EOS", "unknown token"};
    for (int i = 0; i < 3; i++)
        if (*ids[i] >= v->n_tokens)
            return em_error_new(EM_EXIT_BAD_INPUT, "%s: %s id %d is out of range (%d tokens)",
                                source, names[i], *ids[i], v->n_tokens);
    em_text_map_build(&v->by_text, v->text, v->n_tokens, v->types, false);
    tok->family->prepare(tok);

    size_t n_special = 0;
    special_key *keys = em_xmalloc(((size_t)v->n_tokens + 1) * sizeof(special_key));
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (is_special_type(v->types[id]) && v->text[id].len > 0)
            keys[n_special++] = (special_key){(uint8_t)v->text[id].data[0], v->text[id].len, id};
    qsort(keys, n_special, sizeof(special_key), special_order);
    tok->specials = em_xmalloc((n_special + 1) * sizeof(int32_t));
    for (size_t i = 0; i < n_special; i++) tok->specials[i] = keys[i].id;
    free(keys);
    size_t k = 0;
    for (int b = 0; b < 256; b++) {
        tok->special_first[b] = (int32_t)k;
        while (k < n_special && (uint8_t)v->text[tok->specials[k]].data[0] == b) k++;
    }
    tok->special_first[256] = (int32_t)n_special;
    tok->longest_special = 0;
    for (size_t i = 0; i < n_special; i++)
        if (v->text[tok->specials[i]].len > tok->longest_special)
            tok->longest_special = v->text[tok->specials[i]].len;
    return NULL;
}

static bool ascii_letter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether the pre-tokenizer ends a word before every space between two ASCII letters of a probe
 * text (single letters, words of every case, after punctuation and digits, several lines), which
 * the word-at-a-time rows of pre_table.h do; rows whose words hold spaces (whole lines, letters
 * joined by spaces, everything between two CJK runs) do not, and their text is never cut. */
static bool splits_between_words(const em_pretokenizer *pre) {
    static const char probe[] = "a b c d e f ab cd Ab Cd AB CD aB cD The quick brown fox. Jumps "
                                "over: the lazy dog's tail, it's x y z!\nq r 1a b2 c d-e f\tg h "
                                "I said \"no way\" and left (a b) [c d] ok\n\nNew line a b";
    size_t len = sizeof probe - 1;
    em_pretokenize_buf buf = {0};
    em_pretokenize(pre, probe, len, &buf);
    bool ok = true;
    for (size_t p = 1; p + 1 < len && ok; p++) {
        if (probe[p] != ' ' || !ascii_letter(probe[p - 1]) || !ascii_letter(probe[p + 1])) continue;
        bool ends = false;
        for (size_t w = 0; w < buf.n_words && !ends; w++) ends = buf.words[w] == p;
        ok = ends;
    }
    em_pretokenize_buf_free(&buf);
    return ok;
}

em_status em_tokenizer_use_pre_row(em_tokenizer *tok, const em_pre_row *row, const char *source) {
    size_t n = 0;
    while (row->exprs[n]) n++;
    em_pretokenizer_free(tok->pre);
    tok->pre = NULL;
    char *what = em_xasprintf("%s: pre-tokenizer '%s'", source, row->label);
    em_status err = em_pretokenizer_new(row->exprs, n, what, &tok->pre);
    free(what);
    tok->pre_splits_words = !err && splits_between_words(tok->pre);
    return err;
}

void em_tokenizer_free(em_tokenizer *tok) {
    if (!tok) return;
    em_vocab_free(&tok->vocab);
    em_merge_map_free(&tok->merges);
    em_pretokenizer_free(tok->pre);
    free(tok->specials);
    free(tok);
}

em_status em_tokenizer_load(const char *path, em_tokenizer **out) {
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot open tokenizer: %s", path,
                            strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        /* A Hugging Face model folder: its tokenizer.json. */
        char *json = em_xasprintf("%s/tokenizer.json", path);
        em_status err = em_tokenizer_from_json(json, out);
        free(json);
        return err;
    }
    /* mapped, not read: a FIFO or device is refused here instead of blocking the read */
    em_mapped_file file;
    em_status sniffed = em_mapped_file_open(path, "a tokenizer", &file);
    if (sniffed) return sniffed;
    bool gguf = file.size >= 4 && memcmp(file.data, "GGUF", 4) == 0;
    em_mapped_file_close(&file);
    if (gguf) {
        em_gguf *g;
        em_status err = em_gguf_open(path, &g);
        if (err) return err;
        err = em_tokenizer_from_gguf(g, out);
        em_gguf_close(g);
        return err;
    }
    return em_tokenizer_from_json(path, out);
}

em_encode_options em_tokenizer_default_options(const em_tokenizer *tok) {
    return (em_encode_options){
        .add_bos = tok->add_bos, .add_eos = tok->add_eos, .parse_special = false};
}

/* The special token that starts at text[0..len), or -1. User-defined tokens always match;
 * control and unknown tokens only when parse_special is set. */
static int32_t special_at(const em_tokenizer *tok, const char *text, size_t len,
                          bool parse_special) {
    uint8_t b = (uint8_t)text[0];
    for (int32_t k = tok->special_first[b]; k < tok->special_first[b + 1]; k++) {
        int32_t id = tok->specials[k];
        const em_bytes *t = &tok->vocab.text[id];
        if (!parse_special && tok->vocab.types[id] != EM_TOKEN_USER_DEFINED) continue;
        if (t->len <= len && memcmp(t->data, text, t->len) == 0) return id;
    }
    return -1;
}

/* Whether a special token (of any type) could be matched over or next to p: one that starts at
 * some q in [p - longest, p + 1] and matches there. */
static bool special_near(const em_tokenizer *tok, const char *text, size_t len, size_t p) {
    size_t from = p > tok->longest_special ? p - tok->longest_special : 0;
    for (size_t q = from; q <= p + 1 && q < len; q++) {
        uint8_t b = (uint8_t)text[q];
        if (tok->special_first[b] < tok->special_first[b + 1] &&
            special_at(tok, text + q, len - q, true) >= 0)
            return true;
    }
    return false;
}

size_t em_tokenizer_next_cut(const em_tokenizer *tok, const char *text, size_t len, size_t from) {
    if (tok->family->pre_tokenized ? !tok->pre_splits_words : !tok->spm_by_word) return len;
    for (size_t p = from > 0 ? from : 1; p + tok->longest_special + 2 <= len; p++)
        if (text[p] == ' ' && ascii_letter(text[p - 1]) && ascii_letter(text[p + 1]) &&
            !special_near(tok, text, len, p))
            return p;
    return len;
}

em_status em_tokenizer_encode(const em_tokenizer *tok, const char *text, size_t len,
                              em_encode_options options, int32_t **ids, size_t *count) {
    *ids = NULL;
    *count = 0;
    size_t at = options.continue_at; /* where text starts in the whole text */
    bool add_bos = options.add_bos && at == 0;
    size_t bad = em_utf8_invalid_offset(text, len);
    if (bad < len)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "text is not valid UTF-8 at byte offset %zu (byte 0x%02X)", at + bad,
                            (uint8_t)text[bad]);
    if (add_bos && tok->bos < 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "cannot add BOS: the tokenizer has no BOS token");
    if (options.add_eos && tok->eos < 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "cannot add EOS: the tokenizer has no EOS token");

    em_ids out = {0};
    if (add_bos) em_ids_push(&out, tok->bos);
    void *state = tok->family->state_new();
    em_status err = NULL;
    /* Stretches of plain text between special tokens; SPM puts "▁" before the first stretch and
     * after each special token, as llama.cpp does (not before a continuation: a cut point is
     * inside a stretch). */
    bool after_special = at == 0;
    size_t start = 0;
    for (size_t i = 0; i <= len && !err; i++) {
        uint8_t b = i < len ? (uint8_t)text[i] : 0;
        int32_t special = i < len && tok->special_first[b] < tok->special_first[b + 1]
                              ? special_at(tok, text + i, len - i, options.parse_special)
                              : -1;
        if (special < 0 && i < len) continue;
        if (i > start) {
            err = tok->family->encode(tok, state, text + start, i - start, at + start,
                                      tok->add_space_prefix && after_special, &out);
            after_special = false;
        }
        if (special >= 0) {
            em_ids_push(&out, special);
            after_special = true;
            i += tok->vocab.text[special].len - 1;
            start = i + 1;
        }
    }
    tok->family->state_free(state);
    if (err) {
        free(out.data);
        return err;
    }
    if (options.add_eos) em_ids_push(&out, tok->eos);
    if (!out.data) out.data = em_xmalloc(sizeof(int32_t)); /* never NULL on success */
    *ids = out.data;
    *count = out.count;
    return NULL;
}

em_status em_tokenizer_encode_pieces(const em_tokenizer *tok, const char *text, size_t len,
                                     em_encode_options options, size_t piece_bytes,
                                     em_encode_sink sink, void *sink_context) {
    bool enough = false, add_eos = options.add_eos;
    for (size_t p = 0; p < len && !enough;) {
        size_t cut = piece_bytes && len - p > piece_bytes
                         ? em_tokenizer_next_cut(tok, text, len, p + piece_bytes)
                         : len;
        options.continue_at = p;
        options.add_eos = add_eos && cut == len;
        int32_t *ids;
        size_t n;
        em_status err = em_tokenizer_encode(tok, text + p, cut - p, options, &ids, &n);
        if (err) return err;
        if (n) sink(sink_context, ids, n, &enough);
        free(ids);
        p = cut;
    }
    return NULL;
}

em_status em_tokenizer_decode(const em_tokenizer *tok, const int32_t *ids, size_t count,
                              bool keep_special, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    const em_vocab *v = &tok->vocab;
    size_t total = 1;
    for (size_t i = 0; i < count; i++) {
        if (ids[i] < 0 || ids[i] >= v->n_tokens)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "token %zu: id %d is out of range (the vocabulary has %d tokens)",
                                i, ids[i], v->n_tokens);
        total += v->text[ids[i]].len; /* pieces are never longer */
    }
    char *out = em_xmalloc(total);
    size_t n = 0;
    bool first = true;
    for (size_t i = 0; i < count; i++) {
        uint8_t type = v->types[ids[i]];
        bool special =
            type == EM_TOKEN_CONTROL || type == EM_TOKEN_UNKNOWN || type == EM_TOKEN_UNUSED;
        if (special) {
            if (!keep_special) continue;
            memcpy(out + n, v->text[ids[i]].data, v->text[ids[i]].len);
            n += v->text[ids[i]].len;
            continue;
        }
        em_bytes p = v->pieces[ids[i]];
        /* SPM: drop the space the leading-space rule put in front of the text (special tokens
         * before it do not count). */
        if (first && tok->family->space_prefix && tok->add_space_prefix && p.len > 0 &&
            p.data[0] == ' ')
            p.data++, p.len--;
        first = false;
        memcpy(out + n, p.data, p.len);
        n += p.len;
    }
    out[n] = 0;
    *text = out;
    *len = n;
    return NULL;
}

int32_t em_tokenizer_vocab_size(const em_tokenizer *tok) {
    return tok->vocab.n_tokens;
}
int32_t em_tokenizer_bos(const em_tokenizer *tok) {
    return tok->bos;
}
int32_t em_tokenizer_eos(const em_tokenizer *tok) {
    return tok->eos;
}
const char *em_tokenizer_kind(const em_tokenizer *tok) {
    return tok->family->name;
}
const char *em_tokenizer_token_text(const em_tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->vocab.n_tokens ? tok->vocab.text[id].data : NULL;
}
