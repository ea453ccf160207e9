/* Reading text, JSONL and token files into a token stream with per-document counts
 * (see corpus.h). */
#include "stages/data/corpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/regular_file.h"
#include "util/sha256.h"
#include "stages/data/streamed_text.h"
#include "stages/data/wikitext_detok.h"
#include "stages/tokenizer/tokenizer.h"
#include "util/suffix.h"
#include "util/utf8.h"

static const char *format_names[] = {"text", "jsonl", "tokens_u16", "tokens_u32"};

int em_input_format_parse(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(format_names[i], name) == 0) return i;
    return -1;
}

em_input_format em_input_format_from_path(const char *path) {
    if (em_ends_with(path, ".jsonl")) return EM_FORMAT_JSONL;
    if (em_ends_with(path, ".u16") || em_ends_with(path, ".bin16")) return EM_FORMAT_TOKENS_U16;
    if (em_ends_with(path, ".u32") || em_ends_with(path, ".bin32")) return EM_FORMAT_TOKENS_U32;
    return EM_FORMAT_TEXT;
}

static em_status check_utf8(const char *path, const char *text, size_t len) {
    size_t bad = em_utf8_invalid_offset(text, len);
    if (bad == len) return NULL;
    int64_t line, col;
    em_text_line_col(text, bad, &line, &col);
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "%s:%lld:%lld: invalid UTF-8 (byte 0x%02x at byte offset %zu)", path,
                        (long long)line, (long long)col, (unsigned char)text[bad], bad);
}

/* Text is tokenized in pieces of about this many bytes, each piece's ids going straight into the
 * stream: the scratch of tokenizing stays bounded by a piece, not by the document. */
#define PIECE_BYTES ((size_t)1 << 20)

void em_corpus_append(em_corpus *c, size_t *capacity, const int32_t *ids, size_t n,
                      int64_t max_tokens) {
    if ((size_t)c->n_tokens + n > *capacity) {
        while ((size_t)c->n_tokens + n > *capacity) *capacity = *capacity ? 2 * *capacity : 4096;
        c->stream = em_xrealloc(c->stream, *capacity * sizeof *c->stream);
    }
    memcpy(c->stream + c->n_tokens, ids, n * sizeof *ids);
    c->n_tokens += (int64_t)n;
    if (max_tokens > 0 && c->n_tokens >= max_tokens) c->stopped_early = true;
}

/* Where a document's ids go: the corpus stream, until it holds max_tokens. */
typedef struct stream_sink {
    em_corpus *corpus;
    size_t *capacity;
    int64_t max_tokens;
} stream_sink;

static void append_ids(void *context, const int32_t *ids, size_t n, bool *enough) {
    stream_sink *sink = context;
    em_corpus_append(sink->corpus, sink->capacity, ids, n, sink->max_tokens);
    *enough = sink->corpus->stopped_early;
}

/* Tokenizes one document's text and appends it (or counts it as empty). */
static em_status add_document(em_corpus *c, size_t *cap, const char *path, const char *where,
                              const char *text, size_t len, const em_corpus_options *opt,
                              const em_tokenizer *tok) {
    c->documents++;
    if (em_text_is_blank(text, len)) {
        c->empty_documents++;
        return NULL;
    }
    if (opt->max_documents > 0 && (int64_t)c->n_docs >= opt->max_documents) return NULL;
    if (c->stopped_early) return NULL;
    em_encode_options enc = em_tokenizer_default_options(tok);
    enc.add_bos = opt->add_bos;
    enc.add_eos = false;
    enc.parse_special = false;
    int64_t first = c->n_tokens;
    stream_sink sink = {c, cap, opt->max_tokens};
    em_status err;
    if (opt->wikitext_detokenize) {
        size_t detok_len;
        char *detok = em_wikitext_detokenize(text, len, &detok_len);
        err =
            em_tokenizer_encode_pieces(tok, detok, detok_len, enc, PIECE_BYTES, append_ids, &sink);
        free(detok);
    } else {
        err = em_tokenizer_encode_pieces(tok, text, len, enc, PIECE_BYTES, append_ids, &sink);
    }
    if (err) return em_error_prefix(err, "%s%s", path, where);
    if (c->n_tokens == first) {
        c->empty_documents++;
        return NULL;
    }
    c->docs = em_xrealloc(c->docs, (c->n_docs + 1) * sizeof *c->docs);
    c->docs[c->n_docs++] = (em_document_tokens){.start = first,
                                                .count = c->n_tokens - first,
                                                .words = em_text_count_words(text, len),
                                                .bytes = (int64_t)len};
    if (opt->rolling_max_windows > 0) {
        c->rolling_windows += em_rolling_window_count(c->n_tokens - first, opt->rolling_max_length);
        if (c->rolling_windows > opt->rolling_max_windows) c->stopped_early = true;
    }
    return NULL;
}

static em_status read_text(em_corpus *c, const char *path, const char *data, size_t len,
                           const em_corpus_options *opt, const em_tokenizer *tok) {
    em_status err = check_utf8(path, data, len);
    if (err) return err;
    em_text_span *spans;
    size_t n = em_text_split(data, len, opt->split, opt->separator, &spans);
    size_t cap = 0;
    for (size_t i = 0; i < n && !err; i++) {
        char where[64];
        snprintf(where, sizeof where, " (document %zu at byte offset %zu)", i, spans[i].offset);
        err = add_document(c, &cap, path, n > 1 ? where : "", data + spans[i].offset,
                           spans[i].length, opt, tok);
    }
    free(spans);
    return err;
}

static em_status read_jsonl(em_corpus *c, const char *path, const char *data, size_t len,
                            const em_corpus_options *opt, const em_tokenizer *tok) {
    em_status err = check_utf8(path, data, len);
    if (err) return err;
    size_t cap = 0;
    long long line = 0;
    for (size_t i = 0; i < len && !err;) {
        line++;
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        if (!em_text_is_blank(data + i, end - i)) {
            cJSON *obj = cJSON_ParseWithLength(data + i, end - i);
            const cJSON *field =
                cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, opt->text_field) : NULL;
            if (!obj || !cJSON_IsObject(obj)) {
                err = em_error_new(EM_EXIT_BAD_INPUT, "%s:%lld: not a JSON object", path, line);
            } else if (!cJSON_IsString(field)) {
                err = em_error_new(EM_EXIT_BAD_INPUT, "%s:%lld: no string field \"%s\"", path, line,
                                   opt->text_field);
            } else {
                char where[48];
                snprintf(where, sizeof where, ":%lld", line);
                const char *text = field->valuestring;
                err = add_document(c, &cap, path, where, text, strlen(text), opt, tok);
            }
            cJSON_Delete(obj);
        }
        i = end + 1;
    }
    return err;
}

static em_status read_tokens(em_corpus *c, const char *path, const char *data, size_t len,
                             size_t width, const em_tokenizer *tok) {
    if (len % width)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: %zu bytes is not a whole number of %zu-byte token ids", path, len,
                            width);
    int64_t n = (int64_t)(len / width);
    int64_t vocab = em_tokenizer_vocab_size(tok);
    c->stream = em_xmalloc((size_t)(n ? n : 1) * sizeof *c->stream);
    const unsigned char *b = (const unsigned char *)data;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = b + (size_t)i * width;
        uint32_t id = width == 2 ? (uint32_t)(p[0] | p[1] << 8)
                                 : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                                       (uint32_t)p[3] << 24;
        if ((int64_t)id >= vocab)
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: token %lld (byte offset %lld) is id %u, outside the "
                                "vocabulary of %lld tokens",
                                path, (long long)i, (long long)i * (long long)width, id,
                                (long long)vocab);
        c->stream[i] = (int32_t)id;
    }
    c->n_tokens = n;
    c->documents = 1;
    if (n == 0) {
        c->empty_documents = 1;
        return NULL;
    }
    c->docs = em_xmalloc(sizeof *c->docs);
    c->docs[0] = (em_document_tokens){.start = 0, .count = n};
    c->n_docs = 1;
    return NULL;
}

em_status em_corpus_read(const char *path, const em_corpus_options *options,
                         const em_tokenizer *tok, em_corpus *out) {
    if (options->format == EM_FORMAT_TEXT && options->split == EM_SPLIT_NONE &&
        !options->wikitext_detokenize)
        return em_streamed_text_read(path, options, tok, out);
    memset(out, 0, sizeof *out);
    char *data = NULL;
    size_t len = 0;
    em_status err = em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a dataset", &data, &len);
    if (err) return err;
    em_sha256_hex(data, len, out->sha256);
    switch (options->format) {
    case EM_FORMAT_TEXT:
        err = read_text(out, path, data, len, options, tok);
        break;
    case EM_FORMAT_JSONL:
        err = read_jsonl(out, path, data, len, options, tok);
        break;
    case EM_FORMAT_TOKENS_U16:
        err = read_tokens(out, path, data, len, 2, tok);
        break;
    case EM_FORMAT_TOKENS_U32:
        err = read_tokens(out, path, data, len, 4, tok);
        break;
    }
    free(data);
    if (err) em_corpus_free(out);
    return err;
}

void em_corpus_free(em_corpus *corpus) {
    free(corpus->stream);
    free(corpus->docs);
    memset(corpus, 0, sizeof *corpus);
}
