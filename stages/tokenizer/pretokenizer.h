/* The pre-tokenizers of byte-level BPE: they split text into words before merging, following the
 * regular expressions of the tokenizer's training, written out by hand (no regex library;
 * Unicode categories from utf8proc). \s is Unicode White_Space, \p{L} letters, \p{N} numbers.
 *   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen2:  llama3's with \p{N} (one digit per word) instead of \p{N}{1,3} */
#ifndef EVALMESH_TOKENIZER_PRETOKENIZER_H
#define EVALMESH_TOKENIZER_PRETOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef enum em_pretokenizer {
    EM_PRE_GPT2,   /* GGUF tokenizer.ggml.pre "default" or "gpt-2" */
    EM_PRE_LLAMA3, /* "llama3", "llama-v3", "llama-bpe" */
    EM_PRE_QWEN2,  /* "qwen2" */
} em_pretokenizer;

/* Scratch space reused between calls. */
typedef struct em_pretokenize_buf {
    uint32_t *cpts; /* codepoints of the text */
    uint8_t *flags; /* their classes (letter, number, whitespace) */
    size_t *starts; /* byte offset of each codepoint; one more entry for the end */
    size_t *words;  /* output: byte offsets where words end */
    size_t n_words;
    size_t capacity;
} em_pretokenize_buf;

/* Splits valid UTF-8 text[0..len) into words: buf->words[0..n_words) are their end offsets. */
void em_pretokenize(em_pretokenizer kind, const char *text, size_t len, em_pretokenize_buf *buf);
void em_pretokenize_buf_free(em_pretokenize_buf *buf);

/* Decodes the valid UTF-8 character at s: its codepoint, and its length in *n. */
uint32_t em_utf8_decode(const char *s, int *n);
/* Offset of the first byte of text[0..len) that is not valid UTF-8 (overlong forms, surrogates
 * and values past U+10FFFF are invalid), or len when all of it is valid. */
size_t em_utf8_invalid_offset(const char *text, size_t len);

#endif
