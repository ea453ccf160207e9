/* A one-document text file read, checked and tokenized block by block (see streamed_text.h). */
#include "stages/data/streamed_text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/regular_file.h"
#include "util/sha256.h"
#include "util/utf8.h"
#include "stages/tokenizer/tokenizer.h"

#define BLOCK_BYTES ((size_t)1 << 20)

/* The text not yet tokenized: buf[0..n) is the file from offset base; buf[0..checked) is valid
 * UTF-8 (what follows may end inside a character). */
typedef struct reader {
    const char *path;
    int fd;
    char *buf;
    size_t cap, n, checked;
    size_t base;
    bool eof;
    em_sha256 sha;
    int64_t lines;      /* '\n' in the file before base + checked */
    size_t line_start;  /* file offset just after the last of them */
    int64_t space_runs; /* runs of whitespace before base + checked */
    bool ends_in_space; /* the checked text ends with whitespace */
    bool has_text;      /* something other than whitespace was seen */
    size_t cap_tokens;  /* of the corpus stream */
} reader;

/* Reads the next block (hashing it); at the end of the file sets eof. */
static em_status read_block(reader *r) {
    if (r->cap - r->n < BLOCK_BYTES) {
        r->cap = r->n + BLOCK_BYTES > 2 * r->cap ? r->n + BLOCK_BYTES : 2 * r->cap;
        r->buf = em_xrealloc(r->buf, r->cap);
    }
    ssize_t got;
    do got = read(r->fd, r->buf + r->n, BLOCK_BYTES);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "cannot read '%s': %s", r->path, strerror(errno));
    if (r->base + r->n + (size_t)got > EM_TEXT_MAX_BYTES)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "cannot read '%s': it grew past the limit of %zu bytes for %s", r->path,
                            EM_TEXT_MAX_BYTES, "a dataset");
    em_sha256_update(&r->sha, r->buf + r->n, (size_t)got);
    r->n += (size_t)got;
    r->eof = got == 0;
    return NULL;
}

/* The byte length of the UTF-8 character whose lead byte is c. */
static size_t char_bytes(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* Counts lines and words of buf[from..to) (valid UTF-8, whole characters). */
static void count(reader *r, size_t from, size_t to) {
    if (from == to) return;
    const char *t = r->buf + from;
    size_t len = to - from;
    for (const char *nl = t; (nl = memchr(nl, '\n', len - (size_t)(nl - t))); nl++) {
        r->lines++;
        r->line_start = r->base + from + (size_t)(nl - t) + 1;
    }
    /* whitespace runs: this part's, less one when a run goes on from the part before */
    r->space_runs += em_text_count_words(t, len) - 1;
    bool starts_in_space = em_text_is_blank(t, char_bytes((unsigned char)t[0]));
    if (starts_in_space && r->ends_in_space) r->space_runs--;
    size_t last = len - 1;
    while (last > 0 && ((unsigned char)t[last] & 0xC0) == 0x80) last--;
    r->ends_in_space = em_text_is_blank(t + last, len - last);
    if (!em_text_is_blank(t, len)) r->has_text = true;
}

/* Extends the checked text over what was read; invalid UTF-8 is an error naming line, column and
 * byte offset (a character cut by the end of the block waits for the next one). */
static em_status check(reader *r) {
    size_t bad = r->checked + em_utf8_invalid_offset(r->buf + r->checked, r->n - r->checked);
    size_t valid = bad;
    if (bad < r->n && (r->eof || bad + 4 <= r->n)) {
        count(r, r->checked, bad);
        r->checked = bad;
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s:%lld:%zu: invalid UTF-8 (byte 0x%02x at byte offset %zu)", r->path,
                            (long long)r->lines + 1, r->base + bad - r->line_start + 1,
                            (unsigned char)r->buf[bad], r->base + bad);
    }
    count(r, r->checked, valid);
    r->checked = valid;
    return NULL;
}

/* Drops buf[0..k) (tokenized, or not needed). */
static void drop(reader *r, size_t k) {
    memmove(r->buf, r->buf + k, r->n - k);
    r->n -= k;
    r->checked -= k;
    r->base += k;
}

/* Tokenizes buf[0..k) and appends its ids to the stream. */
static em_status tokenize(reader *r, size_t k, const em_corpus_options *opt,
                          const em_tokenizer *tok, em_corpus *c) {
    em_encode_options enc = em_tokenizer_default_options(tok);
    enc.add_bos = opt->add_bos;
    enc.add_eos = false;
    enc.parse_special = false;
    enc.continue_at = r->base;
    int32_t *ids;
    size_t n;
    em_status err = em_tokenizer_encode(tok, r->buf, k, enc, &ids, &n);
    if (err) return em_error_prefix(err, "%s", r->path);
    em_corpus_append(c, &r->cap_tokens, ids, n, opt->max_tokens);
    free(ids);
    drop(r, k);
    return NULL;
}

static em_status read_all(reader *r, const em_corpus_options *opt, const em_tokenizer *tok,
                          em_corpus *c) {
    while (!r->eof) {
        em_status err = read_block(r);
        if (!err) err = check(r);
        if (err) return err;
        if (c->stopped_early) {
            drop(r, r->checked);
            continue;
        }
        /* up to the last cut point: one in the second half of the text, else any */
        size_t cut =
            r->eof ? r->checked : em_tokenizer_next_cut(tok, r->buf, r->checked, r->checked / 2);
        if (cut == r->checked && !r->eof) cut = em_tokenizer_next_cut(tok, r->buf, r->checked, 1);
        if (cut < r->checked || (r->eof && r->has_text && cut > 0))
            if ((err = tokenize(r, cut, opt, tok, c))) return err;
    }
    return NULL;
}

em_status em_streamed_text_read(const char *path, const em_corpus_options *options,
                                const em_tokenizer *tok, em_corpus *out) {
    memset(out, 0, sizeof *out);
    reader r = {.path = path};
    struct stat st;
    em_status err = em_open_regular_file(path, "a dataset", &r.fd, &st);
    if (err) return err;
    if ((size_t)st.st_size > EM_TEXT_MAX_BYTES) {
        close(r.fd);
        return em_error_new(
            EM_EXIT_BAD_INPUT,
            "cannot read '%s': it is %lld bytes, more than the limit of %zu bytes for %s", path,
            (long long)st.st_size, EM_TEXT_MAX_BYTES, "a dataset");
    }
    em_sha256_init(&r.sha);
    err = read_all(&r, options, tok, out);
    uint8_t digest[32];
    em_sha256_final(&r.sha, digest);
    em_sha256_to_hex(digest, out->sha256);
    close(r.fd);
    free(r.buf);
    if (err) {
        em_corpus_free(out);
        return err;
    }
    out->documents = 1;
    if (!r.has_text || out->n_tokens == 0) {
        out->empty_documents = 1;
        out->n_tokens = 0;
        out->stopped_early = false;
        return NULL;
    }
    out->docs = em_xmalloc(sizeof *out->docs);
    out->docs[0] = (em_document_tokens){.start = 0,
                                        .count = out->n_tokens,
                                        .words = r.space_runs + 1,
                                        .bytes = (int64_t)(r.base + r.n)};
    out->n_docs = 1;
    return NULL;
}
