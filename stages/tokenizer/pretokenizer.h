/* The pre-tokenizers of byte-level BPE: they split text into words before merging. A
 * pre-tokenizer is a list of regular expressions (a row of pre_table.h) applied one after the
 * other, each splitting the pieces the previous one left, as llama.cpp's unicode_regex_split
 * does: the matches and the stretches between them become pieces. Expressions llama.cpp runs
 * with hand-written code run with the same code here (GPT-2's and Llama 3's, Kimi K2's \p{Han}+,
 * AFMoE's digit groups); the others run on pre_regex.h's engine. Character classes as llama.cpp
 * has them: \s is Unicode White_Space, \p{L} letters, \p{N} numbers (categories from utf8proc). */
#ifndef EVALMESH_TOKENIZER_PRETOKENIZER_H
#define EVALMESH_TOKENIZER_PRETOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/tokenizer/pre_regex.h"
#include "util/error.h"

/* The most expressions one pre-tokenizer applies. */
#define EM_PRE_MAX_EXPRS 6

/* A compiled pre-tokenizer (read-only once built: threads may share it). */
typedef struct em_pretokenizer em_pretokenizer;

/* Compiles the n expressions; `source` names what asked for them, for errors (exit status 2). */
em_status em_pretokenizer_new(const char *const *exprs, size_t n, const char *source,
                              em_pretokenizer **out);
void em_pretokenizer_free(em_pretokenizer *pre);

/* Scratch space reused between calls. */
typedef struct em_pretokenize_buf {
    uint32_t *cpts;  /* codepoints of the text */
    uint8_t *flags;  /* their classes (letter, number, whitespace) */
    uint32_t *units; /* what the regex engine reads (pre_regex.h) */
    size_t *starts;  /* byte offset of each codepoint; one more entry for the end */
    size_t *ends[2]; /* piece ends (codepoint indices), before and after an expression */
    size_t cap_ends[2];
    size_t *words; /* output: byte offsets where words end */
    size_t n_words;
    size_t capacity;
    em_regex_stack stack;
} em_pretokenize_buf;

/* Splits valid UTF-8 text[0..len) into words: buf->words[0..n_words) are their end offsets. */
void em_pretokenize(const em_pretokenizer *pre, const char *text, size_t len,
                    em_pretokenize_buf *buf);
void em_pretokenize_buf_free(em_pretokenize_buf *buf);

/* Unicode White_Space (what \s matches in the tokenizers' regex engines). */
bool em_is_white_space(uint32_t c);

#endif
