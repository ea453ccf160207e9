/* Shared by the tokenizer fuzz targets (fuzz_tokenizer_bpe.c, fuzz_tokenizer_spm.c): a tokenizer
 * built from an in-memory GGUF vocabulary, and one encode + decode of fuzz input with the checks
 * every tokenizer must pass. Each target adds its own round-trip rule. */
#ifndef EVALMESH_TESTS_FUZZ_TOKENIZER_H
#define EVALMESH_TESTS_FUZZ_TOKENIZER_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "stages/formats/gguf.h"
#include "stages/tokenizer/tokenizer.h"
#include "tests/tokenizer/tiny_gguf.h"

/* The tokenizer of the vocabulary written into g (whose buffer is freed); aborts if the GGUF or
 * the vocabulary is refused. */
static inline em_tokenizer *fuzz_tokenizer_from(tiny_gguf *g) {
    em_gguf *file;
    em_tokenizer *tok;
    if (em_gguf_parse(g->data, g->len, "fuzz.gguf", &file) || em_tokenizer_from_gguf(file, &tok))
        abort();
    em_gguf_close(file);
    free(g->data);
    return tok;
}

/* Encodes text (len bytes) with options o and decodes the ids back into *back (*back_len bytes,
 * caller frees); returns true. An encode error must be invalid UTF-8: exit status 2 and a message
 * naming a byte offset inside the text; then returns false. Aborts on any other error, and on an
 * id outside the vocabulary. */
static inline bool fuzz_encode_decode(em_tokenizer *tok, const char *text, size_t len,
                                      em_encode_options o, char **back, size_t *back_len) {
    int32_t *ids;
    size_t n;
    em_status err = em_tokenizer_encode(tok, text, len, o, &ids, &n);
    if (err) {
        size_t offset;
        if (err->exit_code != 2 ||
            sscanf(err->message, "text is not valid UTF-8 at byte offset %zu", &offset) != 1 ||
            offset >= len)
            abort();
        em_error_free(err);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= em_tokenizer_vocab_size(tok)) abort();
    if (em_tokenizer_decode(tok, ids, n, false, back, back_len)) abort();
    free(ids);
    return true;
}

#endif
