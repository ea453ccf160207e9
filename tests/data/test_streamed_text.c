/* The one-document text reader (stages/data/streamed_text.h), which reads, checks and tokenizes a
 * file in 1 MiB blocks, against the whole file at once: the same ids as one em_tokenizer_encode
 * call (stories260K's SentencePiece and GPT-2's byte-level BPE), the same word and byte counts as
 * em_text_count_words, the same sha256; on WikiText-2 and on files made to sit on the block edges
 * (a character and a whitespace run across them, a word longer than a block: no cut point), a blank
 * file, max_tokens (a prefix, stopped_early) and invalid UTF-8 after the first block (the line,
 * column and byte offset em_text_line_col gives). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "stages/data/corpus.h"
#include "stages/data/streamed_text.h"
#include "stages/tokenizer/tokenizer.h"
#include "util/sha256.h"

#define MIB ((size_t)1 << 20)

static char dir[] = "/tmp/em_streamed_textXXXXXX";

static char *write_file(const char *name, const char *data, size_t len) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
    return path;
}

static em_corpus_options text_options(int64_t max_tokens) {
    return (em_corpus_options){.format = EM_FORMAT_TEXT,
                               .split = EM_SPLIT_NONE,
                               .add_bos = true,
                               .max_tokens = max_tokens};
}

/* Reads data (written to a file) streamed and checks it against the whole text. */
static void check_same(const char *label, const em_tokenizer *tok, const char *data, size_t len,
                       int64_t max_tokens) {
    char *path = write_file("text.txt", data, len);
    em_corpus_options opt = text_options(max_tokens);
    em_corpus c;
    em_status err = em_streamed_text_read(path, &opt, tok, &c);
    if (err) fprintf(stderr, "%s: %s\n", label, err->message);
    CHECK(err == NULL);
    em_encode_options enc = em_tokenizer_default_options(tok);
    enc.add_bos = true;
    int32_t *ids;
    size_t n;
    CHECK(em_tokenizer_encode(tok, data, len, enc, &ids, &n) == NULL);
    char sha[65];
    em_sha256_hex(data, len, sha);
    if (!err) {
        CHECK_STR_EQ(c.sha256, sha);
        CHECK_INT_EQ(c.documents, 1);
        CHECK_INT_EQ(c.n_docs, 1);
        if (max_tokens > 0 && (size_t)max_tokens < n) {
            CHECK(c.stopped_early);
            CHECK(c.n_tokens >= max_tokens && (size_t)c.n_tokens <= n);
        } else {
            CHECK(!c.stopped_early);
            CHECK_INT_EQ(c.n_tokens, n);
        }
        size_t same = 0;
        while (same < (size_t)c.n_tokens && same < n && c.stream[same] == ids[same]) same++;
        if (same != (size_t)c.n_tokens)
            fprintf(stderr, "%s: first difference at id %zu of %lld\n", label, same,
                    (long long)c.n_tokens);
        CHECK_INT_EQ(same, c.n_tokens);
        if (c.n_docs == 1) {
            CHECK_INT_EQ(c.docs[0].count, c.n_tokens);
            CHECK_INT_EQ(c.docs[0].words, em_text_count_words(data, len));
            CHECK_INT_EQ(c.docs[0].bytes, len);
        }
        em_corpus_free(&c);
    }
    free(ids);
    unlink(path);
    free(path);
}

/* Text of about len bytes: words of TinyStories-like letters and spaces, with `edge` put so that
 * it straddles every 1 MiB boundary. */
static char *edged_text(size_t len, const char *edge) {
    char *t = malloc(len);
    static const char words[] = "Once upon a time there was a little girl named Lily ";
    for (size_t i = 0; i < len; i++) t[i] = words[i % (sizeof words - 1)];
    size_t m = strlen(edge);
    for (size_t b = MIB; b + m < len; b += MIB) memcpy(t + b - m / 2, edge, m);
    return t;
}

int main(void) {
    char model[512], gpt2[512], wiki_path[512];
    test_shared_file("models/stories260K.gguf", model, sizeof model);
    test_shared_file("tokenizers/gpt-2/ggml-vocab-gpt-2.gguf", gpt2, sizeof gpt2);
    test_shared_file("text/wikitext-2-raw-v1.test.txt", wiki_path, sizeof wiki_path);
    CHECK(mkdtemp(dir) != NULL);
    FILE *f = fopen(wiki_path, "rb");
    CHECK(f != NULL);
    if (!f) return test_finish();
    size_t wiki_len = 0, cap = 4 * MIB;
    char *wiki = malloc(cap);
    wiki_len = fread(wiki, 1, cap, f);
    fclose(f);

    const char *paths[] = {model, gpt2};
    for (int t = 0; t < 2; t++) {
        em_tokenizer *tok;
        CHECK(em_tokenizer_load(paths[t], &tok) == NULL);
        check_same("WikiText-2", tok, wiki, wiki_len, 0);
        check_same("WikiText-2, max_tokens", tok, wiki, wiki_len, 1000);
        size_t len = 3 * MIB + 12345;
        /* an ideographic space, a 4-byte character, a run of spaces and of newlines on the edges */
        static const char *edges[] = {"a\xE3\x80\x80"
                                      "b",
                                      "x\xF0\x9F\x98\x80y", "a            b", "a\n\n\n\n\nb c"};
        for (size_t e = 0; e < sizeof edges / sizeof *edges; e++) {
            char *text = edged_text(len, edges[e]);
            check_same("block edges", tok, text, len, 0);
            free(text);
        }
        /* a word longer than a block: no cut point, held whole */
        size_t word_len = MIB + 4321;
        char *word = malloc(word_len);
        for (size_t i = 0; i < word_len; i++) word[i] = (char)('a' + i % 26);
        memcpy(word + word_len - 10, " the end. ", 10);
        check_same("one long word", tok, word, word_len, 0);
        free(word);
        em_tokenizer_free(tok);
    }

    em_tokenizer *tok;
    CHECK(em_tokenizer_load(model, &tok) == NULL);
    /* blank: one empty document, no tokens */
    char *blank = malloc(2 * MIB);
    for (size_t i = 0; i < 2 * MIB; i++) blank[i] = i % 50 == 49 ? '\n' : ' ';
    char *path = write_file("blank.txt", blank, 2 * MIB);
    em_corpus_options opt = text_options(0);
    em_corpus c;
    CHECK(em_streamed_text_read(path, &opt, tok, &c) == NULL);
    CHECK_INT_EQ(c.documents, 1);
    CHECK_INT_EQ(c.empty_documents, 1);
    CHECK_INT_EQ(c.n_tokens, 0);
    CHECK_INT_EQ(c.n_docs, 0);
    em_corpus_free(&c);
    unlink(path);
    free(path);
    free(blank);

    /* invalid UTF-8 in the second block, and a truncated character at the end of the file */
    size_t len = MIB + 5000;
    char *text = edged_text(len, "\n");
    text[MIB + 777] = (char)0xFF;
    path = write_file("bad.txt", text, len);
    em_status err = em_streamed_text_read(path, &opt, tok, &c);
    CHECK(err != NULL);
    int64_t line, col;
    em_text_line_col(text, MIB + 777, &line, &col);
    char want[768];
    snprintf(want, sizeof want, "%s:%lld:%lld: invalid UTF-8 (byte 0xff at byte offset %zu)", path,
             (long long)line, (long long)col, MIB + 777);
    if (err) {
        CHECK_STR_EQ(err->message, want);
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        em_error_free(err);
    }
    unlink(path);
    free(path);
    text[MIB + 777] = 'a';
    text[len - 1] = (char)0xE3;
    path = write_file("truncated.txt", text, len);
    err = em_streamed_text_read(path, &opt, tok, &c);
    CHECK(err != NULL);
    em_text_line_col(text, len - 1, &line, &col);
    snprintf(want, sizeof want, "%s:%lld:%lld: invalid UTF-8 (byte 0xe3 at byte offset %zu)", path,
             (long long)line, (long long)col, len - 1);
    if (err) {
        CHECK_STR_EQ(err->message, want);
        em_error_free(err);
    }
    unlink(path);
    free(path);
    free(text);
    em_tokenizer_free(tok);
    free(wiki);
    rmdir(dir);
    return test_finish();
}
