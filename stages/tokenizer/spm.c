/* SentencePiece-style BPE as llama.cpp's `llama` vocabulary runs it. Spaces become "▁" (U+2581)
 * and, with add_space_prefix, a "▁" goes in front; the text is split into UTF-8 characters; then
 * the adjacent pair whose concatenation is the highest-scoring token is merged, again and again
 * (a priority queue of candidate pairs, ties to the left), until no pair forms a token. Each final
 * symbol is its token, or, when the vocabulary lacks it, one byte token <0xNN> per byte (byte
 * fallback), or the unknown token. When no token has "▁" after another character (true of Llama's
 * vocabulary), no merge can cross the start of a word, so each word is merged on its own and
 * cached: the same result, much faster on long texts. */
#include <stdlib.h>
#include <string.h>

#include "stages/tokenizer/bigram_queue.h"
#include "stages/tokenizer/tokenizer_impl.h"
#include "stages/tokenizer/word_cache.h"

static const char SPACE_MARK[] = "\xE2\x96\x81"; /* "▁" U+2581, 3 bytes */

typedef struct spm_symbol {
    uint32_t start; /* byte offset in the escaped text */
    uint32_t n;     /* byte length; 0 once merged into its left neighbour */
    int32_t prev, next;
} spm_symbol;

typedef struct em_spm_state {
    char *escaped;   /* the text with "▁" for spaces */
    size_t capacity; /* of escaped */
    /* The fragment being encoded, to turn escaped positions back into text offsets. */
    const char *text;
    size_t offset;
    bool prefix_space;
    spm_symbol *symbols;
    size_t symbols_capacity;
    em_bigram_queue queue;
    em_word_cache cache;
} em_spm_state;

void *em_spm_state_new(void) {
    return em_xcalloc(1, sizeof(em_spm_state));
}

void em_spm_state_free(void *state) {
    em_spm_state *st = state;
    if (!st) return;
    free(st->escaped);
    free(st->symbols);
    em_bigram_queue_free(&st->queue);
    em_word_cache_free(&st->cache);
    free(st);
}

/* Pieces: "▁" reads as a space, a byte token <0xNN> as its byte, other tokens as their text. */
/* Where a word starts: a "▁" at p > 0 that does not follow another "▁". */
static bool word_start(const char *s, size_t p) {
    return p > 0 && s[p] == SPACE_MARK[0] && memcmp(s + p, SPACE_MARK, 3) == 0 &&
           (p < 3 || memcmp(s + p - 3, SPACE_MARK, 3) != 0);
}

void em_spm_prepare(em_tokenizer *tok) {
    em_vocab *v = &tok->vocab;
    for (int i = 0; i < 256; i++) tok->byte_tokens[i] = -1;
    tok->spm_by_word = true;
    for (int32_t id = 0; id < v->n_tokens && tok->spm_by_word; id++)
        for (uint32_t p = 1; p + 3 <= v->text[id].len; p++)
            if (word_start(v->text[id].data, p)) tok->spm_by_word = false;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const em_bytes t = v->text[id];
        char *piece = (char *)v->pieces[id].data;
        uint32_t len = 0;
        if (v->types[id] == EM_TOKEN_BYTE && t.len == 6 && memcmp(t.data, "<0x", 3) == 0 &&
            t.data[5] == '>') {
            char hex[3] = {t.data[3], t.data[4], 0};
            char *end;
            long b = strtol(hex, &end, 16);
            if (*end == 0) {
                piece[len++] = (char)b;
                if (tok->byte_tokens[b] < 0) tok->byte_tokens[b] = id;
                v->pieces[id].len = len;
                continue;
            }
        }
        for (uint32_t i = 0; i < t.len;) {
            if (t.len - i >= 3 && memcmp(t.data + i, SPACE_MARK, 3) == 0) {
                piece[len++] = ' ';
                i += 3;
            } else {
                piece[len++] = t.data[i++];
            }
        }
        v->pieces[id].len = len;
    }
}

/* Escapes text into st->escaped. */
static size_t escape(em_spm_state *st, const char *text, size_t len, size_t offset,
                     bool prefix_space) {
    size_t need = 3 * (len + 1);
    if (need > st->capacity) {
        st->capacity = need;
        st->escaped = em_xrealloc(st->escaped, need);
    }
    st->text = text;
    st->offset = offset;
    st->prefix_space = prefix_space;
    size_t n = 0;
    if (prefix_space) {
        memcpy(st->escaped + n, SPACE_MARK, 3);
        n += 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(st->escaped + n, SPACE_MARK, 3);
            n += 3;
        } else {
            st->escaped[n++] = text[i];
        }
    }
    return n;
}

/* The offset in the caller's text of the byte at escaped position p (for errors). */
static size_t text_offset(const em_spm_state *st, size_t p) {
    size_t j = st->prefix_space ? 3 : 0;
    if (p < j) return st->offset;
    for (size_t i = 0;; i++) {
        size_t width = st->text[i] == ' ' ? 3 : 1;
        if (p < j + width) return st->offset + i;
        j += width;
    }
}

/* Queues the pair (left, right) when their concatenation is a token. */
static void try_pair(const em_tokenizer *tok, em_spm_state *st, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const spm_symbol *l = &st->symbols[left], *r = &st->symbols[right];
    uint32_t size = l->n + r->n;
    int32_t id = em_text_map_find(&tok->vocab.by_text, st->escaped + l->start, size);
    if (id < 0) return;
    em_bigram b = {-(double)tok->vocab.scores[id], left, right, (int32_t)size, 0};
    em_bigram_queue_push(&st->queue, b);
}

/* The token for one byte: <0xNN>, else a token spelling the byte itself, else -1. */
static int32_t byte_token(const em_tokenizer *tok, const char *byte) {
    int32_t id = tok->byte_tokens[(uint8_t)*byte];
    return id >= 0 ? id : em_text_map_find(&tok->vocab.by_text, byte, 1);
}

/* Appends the token of a final symbol; when the vocabulary lacks it, its byte tokens; when a byte
 * has none either, the unknown token. */
static em_status emit(const em_tokenizer *tok, const em_spm_state *st, const spm_symbol *s,
                      em_ids *out) {
    const char *text = st->escaped + s->start;
    int32_t id = em_text_map_find(&tok->vocab.by_text, text, s->n);
    if (id >= 0) {
        em_ids_push(out, id);
        return NULL;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        if (byte_token(tok, text + i) >= 0) continue;
        if (tok->unk >= 0) {
            em_ids_push(out, tok->unk);
            return NULL;
        }
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "cannot encode the text at byte offset %zu: the vocabulary has no "
                            "token for '%.*s', no byte token <0x%02X> and no unknown token",
                            text_offset(st, s->start + i), (int)s->n, text, (uint8_t)text[i]);
    }
    for (uint32_t i = 0; i < s->n; i++) em_ids_push(out, byte_token(tok, text + i));
    return NULL;
}

/* Merges the symbols of escaped[begin..end) and appends their tokens. */
static em_status encode_range(const em_tokenizer *tok, em_spm_state *st, size_t begin, size_t end,
                              em_ids *out) {
    /* One symbol per UTF-8 character (the text was validated). */
    int32_t n = 0;
    for (size_t i = begin; i < end;) {
        uint8_t c = (uint8_t)st->escaped[i];
        uint32_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        st->symbols[n] = (spm_symbol){(uint32_t)i, k, n - 1, i + k == end ? -1 : n + 1};
        i += k;
        n++;
    }
    st->queue.count = 0;
    for (int32_t i = 1; i < n; i++) try_pair(tok, st, i - 1, i);
    em_bigram b;
    while (em_bigram_queue_pop(&st->queue, &b)) {
        spm_symbol *l = &st->symbols[b.left], *r = &st->symbols[b.right];
        /* Skip pairs that changed since they were queued. */
        if (l->n == 0 || r->n == 0 || l->n + r->n != (uint32_t)b.a) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) st->symbols[r->next].prev = b.left;
        try_pair(tok, st, l->prev, b.left);
        try_pair(tok, st, b.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = st->symbols[i].next) {
        em_status err = emit(tok, st, &st->symbols[i], out);
        if (err) return err;
    }
    return NULL;
}

em_status em_spm_encode(const em_tokenizer *tok, void *state, const char *text, size_t len,
                        size_t offset, bool prefix_space, em_ids *out) {
    em_spm_state *st = state;
    size_t n_bytes = escape(st, text, len, offset, prefix_space);
    if (n_bytes == 0) return NULL;
    if (n_bytes > INT32_MAX)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "text at byte offset %zu is too long to encode (%zu bytes; at most "
                            "2 GiB at a time)",
                            offset, len);
    if (n_bytes > st->symbols_capacity) {
        st->symbols_capacity = n_bytes;
        st->symbols = em_xrealloc(st->symbols, n_bytes * sizeof(spm_symbol));
    }
    if (!tok->spm_by_word) return encode_range(tok, st, 0, n_bytes, out);
    const char *s = st->escaped;
    for (size_t begin = 0; begin < n_bytes;) {
        size_t end = begin + 1;
        while (end < n_bytes && !(end + 3 <= n_bytes && word_start(s, end))) end++;
        uint64_t hash = em_bytes_hash(s + begin, end - begin);
        size_t n_ids;
        const int32_t *ids = em_word_cache_get(&st->cache, s + begin, end - begin, hash, &n_ids);
        if (ids) {
            for (size_t i = 0; i < n_ids; i++) em_ids_push(out, ids[i]);
        } else {
            size_t first = out->count;
            em_status err = encode_range(tok, st, begin, end, out);
            if (err) return err;
            em_word_cache_put(&st->cache, s + begin, end - begin, hash, out->data + first,
                              out->count - first);
        }
        begin = end;
    }
    return NULL;
}
