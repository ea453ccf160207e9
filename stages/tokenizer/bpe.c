/* Byte-level BPE (GGUF tokenizer.ggml.model = "gpt2", Hugging Face BPE with a ByteLevel
 * pre-tokenizer). The text is split into words by the pre-tokenizer; each word starts as one
 * symbol per byte (the token spelling that byte through the byte-to-unicode mapping); then the
 * adjacent pair with the lowest merge rank is merged, again and again (a priority queue, ties to
 * the left), until no pair has a merge: O(n log n) in the word's length. Results are cached per
 * word for the duration of one encode call (word_cache.h). */
#include <stdlib.h>
#include <string.h>

#include "stages/tokenizer/bigram_queue.h"
#include "stages/tokenizer/byte_unicode.h"
#include "stages/tokenizer/tokenizer_impl.h"
#include "stages/tokenizer/word_cache.h"
#include "util/utf8.h"

typedef struct bpe_symbol {
    int32_t id; /* -1 once merged into its left neighbour */
    int32_t prev, next;
} bpe_symbol;

typedef struct em_bpe_state {
    em_pretokenize_buf pre;
    bpe_symbol *symbols;
    size_t symbols_capacity;
    em_bigram_queue queue;
    em_word_cache cache;
} em_bpe_state;

void *em_bpe_state_new(void) {
    return em_xcalloc(1, sizeof(em_bpe_state));
}

void em_bpe_state_free(void *state) {
    em_bpe_state *st = state;
    if (!st) return;
    em_pretokenize_buf_free(&st->pre);
    free(st->symbols);
    em_bigram_queue_free(&st->queue);
    em_word_cache_free(&st->cache);
    free(st);
}

void em_bpe_prepare(em_tokenizer *tok) {
    em_vocab *v = &tok->vocab;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        const em_bytes t = v->text[id];
        char *piece = (char *)v->pieces[id].data;
        uint8_t type = v->types[id];
        bool mapped = type == EM_TOKEN_NORMAL || type == EM_TOKEN_UNDEFINED ||
                      type == EM_TOKEN_BYTE || type == EM_TOKEN_UNUSED;
        if (!mapped || em_utf8_invalid_offset(t.data, t.len) != t.len) {
            memcpy(piece, t.data, t.len);
            v->pieces[id].len = t.len;
            continue;
        }
        /* Each character spells one byte; characters outside the mapping stay as they are. */
        uint32_t len = 0;
        for (uint32_t i = 0; i < t.len;) {
            int k;
            int b = em_unicode_to_byte(em_utf8_decode(t.data + i, &k));
            if (b >= 0) {
                piece[len++] = (char)b;
            } else {
                memcpy(piece + len, t.data + i, (size_t)k);
                len += (uint32_t)k;
            }
            i += (uint32_t)k;
        }
        v->pieces[id].len = len;
    }
    for (int b = 0; b < 256; b++) {
        char buf[4];
        uint32_t c = em_byte_to_unicode((uint8_t)b);
        size_t n = c < 0x80 ? 1 : 2; /* the mapping stays below U+0800 */
        if (n == 1)
            buf[0] = (char)c;
        else
            buf[0] = (char)(0xC0 | c >> 6), buf[1] = (char)(0x80 | (c & 0x3F));
        tok->byte_tokens[b] = em_text_map_find(&v->by_text, buf, n);
    }
    if (tok->ignore_merges) em_text_map_build(&v->by_piece, v->pieces, v->n_tokens, v->types, true);
}

em_status em_bpe_add_merge_pair(em_tokenizer *tok, const char *source, size_t rank,
                                const char *left, size_t left_len, const char *right,
                                size_t right_len) {
    const em_text_map *map = &tok->vocab.by_text;
    int32_t l = em_text_map_find(map, left, left_len);
    int32_t r = em_text_map_find(map, right, right_len);
    if (l < 0 || r < 0) {
        const char *bad = l < 0 ? left : right;
        int bad_len = (int)(l < 0 ? left_len : right_len);
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: merge %zu '%.*s %.*s' refers to unknown token "
                            "'%.*s'",
                            source, rank, (int)left_len, left, (int)right_len, right, bad_len, bad);
    }
    size_t n = left_len + right_len;
    char small[256];
    char *joined = n <= sizeof(small) ? small : em_xmalloc(n);
    memcpy(joined, left, left_len);
    memcpy(joined + left_len, right, right_len);
    int32_t result = em_text_map_find(map, joined, n);
    if (joined != small) free(joined);
    if (result < 0)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: merge %zu '%.*s %.*s' makes '%.*s%.*s', which "
                            "is not in the vocabulary",
                            source, rank, (int)left_len, left, (int)right_len, right, (int)left_len,
                            left, (int)right_len, right);
    if (rank > INT32_MAX)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: more than 2^31 merges", source);
    /* A repeated pair keeps its first (lowest) rank. */
    em_merge_map_add(&tok->merges, l, r, (int32_t)rank, result);
    return NULL;
}

em_status em_bpe_add_merge_text(em_tokenizer *tok, const char *source, size_t rank,
                                const char *text, size_t len) {
    const char *space = len > 1 ? memchr(text + 1, ' ', len - 1) : NULL;
    if (!space)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: merge %zu '%.*s' is not two tokens separated by a space", source,
                            rank, (int)len, text);
    size_t left_len = (size_t)(space - text);
    return em_bpe_add_merge_pair(tok, source, rank, text, left_len, space + 1, len - left_len - 1);
}

static void queue_pair(const em_tokenizer *tok, em_bpe_state *st, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    int32_t a = st->symbols[left].id, b = st->symbols[right].id;
    const em_merge *m = em_merge_map_find(&tok->merges, a, b);
    if (m) em_bigram_queue_push(&st->queue, (em_bigram){(double)m->rank, left, right, a, b});
}

/* Merges one word (not cached) and appends its ids. */
static em_status merge_word(const em_tokenizer *tok, em_bpe_state *st, const char *word, size_t len,
                            size_t offset, em_ids *out) {
    if (tok->ignore_merges) {
        int32_t id = em_text_map_find(&tok->vocab.by_piece, word, len);
        if (id >= 0) {
            em_ids_push(out, id);
            return NULL;
        }
    }
    if (len > st->symbols_capacity) {
        st->symbols_capacity = 2 * len;
        st->symbols = em_xrealloc(st->symbols, st->symbols_capacity * sizeof(bpe_symbol));
    }
    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = tok->byte_tokens[(uint8_t)word[i]];
        if (id < 0)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "cannot encode byte 0x%02X at byte offset %zu: the vocabulary has "
                                "no token for it",
                                (uint8_t)word[i], offset + (size_t)i);
        st->symbols[i] = (bpe_symbol){id, i - 1, i + 1 == n ? -1 : i + 1};
    }
    st->queue.count = 0;
    for (int32_t i = 1; i < n; i++) queue_pair(tok, st, i - 1, i);
    em_bigram b;
    while (em_bigram_queue_pop(&st->queue, &b)) {
        bpe_symbol *l = &st->symbols[b.left], *r = &st->symbols[b.right];
        /* Skip pairs that changed since they were queued. */
        if (l->id != b.a || r->id != b.b) continue;
        l->id = em_merge_map_find(&tok->merges, b.a, b.b)->result;
        r->id = -1;
        l->next = r->next;
        if (r->next >= 0) st->symbols[r->next].prev = b.left;
        queue_pair(tok, st, l->prev, b.left);
        queue_pair(tok, st, b.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = st->symbols[i].next) em_ids_push(out, st->symbols[i].id);
    return NULL;
}

em_status em_bpe_encode(const em_tokenizer *tok, void *state, const char *text, size_t len,
                        size_t offset, bool prefix_space, em_ids *out) {
    em_bpe_state *st = state;
    if (len > INT32_MAX)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "text at byte offset %zu is too long to encode "
                            "(%zu bytes; at most 2 GiB at a time)",
                            offset, len);
    em_pretokenize(tok->pre, text, len, &st->pre);
    size_t start = 0;
    for (size_t w = 0; w < st->pre.n_words; w++) {
        size_t end = st->pre.words[w];
        const char *word = text + start;
        size_t word_len = end - start;
        uint64_t hash = em_bytes_hash(word, word_len);
        size_t n_ids;
        const int32_t *ids = em_word_cache_get(&st->cache, word, word_len, hash, &n_ids);
        if (ids) {
            for (size_t i = 0; i < n_ids; i++) em_ids_push(out, ids[i]);
        } else {
            size_t first = out->count;
            em_status err = merge_word(tok, st, word, word_len, offset + start, out);
            if (err) return err;
            em_word_cache_put(&st->cache, word, word_len, hash, out->data + first,
                              out->count - first);
        }
        start = end;
    }
    return NULL;
}
