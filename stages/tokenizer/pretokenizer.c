/* The GPT-2 and Llama 3 pre-tokenizers as hand-written matchers over codepoints (the same
 * left-to-right logic as llama.cpp's unicode_regex_split_custom_*), and UTF-8 helpers. */
#include "stages/tokenizer/pretokenizer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <utf8proc.h>

#include "util/error.h"

/* Character classes. Every codepoint inside the text has F_IN; past either end flags are 0. */
enum { F_IN = 1, F_LETTER = 2, F_NUMBER = 4, F_SPACE = 8 };

/* Unicode White_Space (what \s matches in the tokenizers' regex engines). */
static bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static uint8_t classify(uint32_t c) {
    uint8_t f = F_IN;
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return f | F_LETTER;
        if (c >= '0' && c <= '9') return f | F_NUMBER;
        if (is_white_space(c)) return f | F_SPACE;
        return f;
    }
    if (is_white_space(c)) f |= F_SPACE;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        f |= F_LETTER;
        break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        f |= F_NUMBER;
        break;
    default:
        break;
    }
    return f;
}

uint32_t em_utf8_decode(const char *s, int *n) {
    const uint8_t *u = (const uint8_t *)s;
    if (u[0] < 0x80) {
        *n = 1;
        return u[0];
    }
    if (u[0] < 0xE0) {
        *n = 2;
        return (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
    }
    if (u[0] < 0xF0) {
        *n = 3;
        return (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
    }
    *n = 4;
    return (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
           (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
}

size_t em_utf8_invalid_offset(const char *text, size_t len) {
    const uint8_t *u = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        uint8_t c = u[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t min;
        if (c >= 0xC2 && c <= 0xDF)
            n = 2, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF)
            n = 3, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4)
            n = 4, min = 0x10000;
        else
            return i;
        if (len - i < n) return i;
        uint32_t cpt = c & (0x7F >> n);
        for (size_t k = 1; k < n; k++) {
            if ((u[i + k] & 0xC0) != 0x80) return i;
            cpt = cpt << 6 | (u[i + k] & 0x3F);
        }
        if (cpt < min || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return i;
        i += n;
    }
    return len;
}

/* The matcher's view of the text: codepoints and flags, reading past either end as 0. */
typedef struct cursor {
    const uint32_t *cpts;
    const uint8_t *flags;
    size_t n;
} cursor;

static uint32_t cpt_at(const cursor *c, size_t i) {
    return i < c->n ? c->cpts[i] : UINT32_MAX;
}
static uint8_t flags_at(const cursor *c, size_t i) {
    return i < c->n ? c->flags[i] : 0;
}
static uint32_t ascii_lower(uint32_t c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* Length of the contraction ('s 't 're 've 'm 'll 'd) at i, 0 when there is none. */
static size_t contraction(const cursor *c, size_t i, bool ignore_case) {
    if (cpt_at(c, i) != '\'' || i + 1 >= c->n) return 0;
    uint32_t a = cpt_at(c, i + 1), b = i + 2 < c->n ? cpt_at(c, i + 2) : 0;
    if (ignore_case) a = ascii_lower(a), b = ascii_lower(b);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* Runs of whitespace: \s+(?!\S) leaves the last space to the next word unless the run ends the
 * text; otherwise \s+ takes it all. Returns the end of the match starting at i. */
static size_t whitespace_run(const cursor *c, size_t i) {
    size_t n = 0;
    while (flags_at(c, i + n) & F_SPACE) n++;
    if (n > 1 && i + n < c->n) return i + n - 1;
    if (n > 0) return i + n;
    return i + 1; /* no alternative matched: a word of one character */
}

static size_t match_gpt2(const cursor *c, size_t i) {
    size_t k = contraction(c, i, false);
    if (k) return i + k;
    uint32_t cpt = c->cpts[i];
    size_t j = i + (cpt == ' ');
    uint8_t f = flags_at(c, j);
    if (f & F_LETTER) { /* ' ?\p{L}+' */
        while (flags_at(c, j) & F_LETTER) j++;
        return j;
    }
    if (f & F_NUMBER) { /* ' ?\p{N}+' */
        while (flags_at(c, j) & F_NUMBER) j++;
        return j;
    }
    if (f && !(f & (F_SPACE | F_LETTER | F_NUMBER))) { /* ' ?[^\s\p{L}\p{N}]+' */
        while ((f = flags_at(c, j)) && !(f & (F_SPACE | F_LETTER | F_NUMBER))) j++;
        return j;
    }
    return whitespace_run(c, i);
}

/* Llama 3's rules; Qwen2's are the same with numbers split into single digits. */
static size_t match_llama3(const cursor *c, size_t i, size_t max_digits) {
    size_t k = contraction(c, i, true);
    if (k) return i + k;
    uint32_t cpt = c->cpts[i];
    uint8_t f = c->flags[i];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!(cpt == '\r' || cpt == '\n' || (f & F_NUMBER)) &&
        ((f & F_LETTER) || (flags_at(c, i + 1) & F_LETTER))) {
        size_t j = i + 1;
        while (flags_at(c, j) & F_LETTER) j++;
        return j;
    }
    if (f & F_NUMBER) { /* \p{N}{1,3} (Qwen2: \p{N}) */
        size_t j = i;
        while (j < i + max_digits && (flags_at(c, j) & F_NUMBER)) j++;
        return j;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    size_t j = i + (cpt == ' ');
    uint8_t g = flags_at(c, j);
    if (g && !(g & (F_SPACE | F_LETTER | F_NUMBER))) {
        while ((g = flags_at(c, j)) && !(g & (F_SPACE | F_LETTER | F_NUMBER))) j++;
        while (cpt_at(c, j) == '\r' || cpt_at(c, j) == '\n') j++;
        return j;
    }
    /* \s*[\r\n]+ : the whitespace run up to its last \r or \n */
    size_t n = 0, last_newline = 0;
    while (flags_at(c, i + n) & F_SPACE) {
        uint32_t s = c->cpts[i + n];
        if (s == '\r' || s == '\n') last_newline = i + n + 1;
        n++;
    }
    if (last_newline) return last_newline;
    return whitespace_run(c, i);
}

static void reserve(em_pretokenize_buf *buf, size_t n) {
    if (n <= buf->capacity) return;
    size_t cap = buf->capacity ? buf->capacity : 256;
    while (cap < n) cap *= 2;
    buf->cpts = em_xrealloc(buf->cpts, cap * sizeof(uint32_t));
    buf->flags = em_xrealloc(buf->flags, cap);
    buf->starts = em_xrealloc(buf->starts, (cap + 1) * sizeof(size_t));
    buf->words = em_xrealloc(buf->words, cap * sizeof(size_t));
    buf->capacity = cap;
}

void em_pretokenize(em_pretokenizer kind, const char *text, size_t len, em_pretokenize_buf *buf) {
    reserve(buf, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        int k;
        uint32_t cpt = em_utf8_decode(text + i, &k);
        buf->cpts[n] = cpt;
        buf->flags[n] = classify(cpt);
        buf->starts[n] = i;
        i += (size_t)k;
    }
    buf->starts[n] = len;
    cursor c = {buf->cpts, buf->flags, n};
    buf->n_words = 0;
    for (size_t i = 0; i < n;) {
        size_t end = kind == EM_PRE_GPT2     ? match_gpt2(&c, i)
                     : kind == EM_PRE_LLAMA3 ? match_llama3(&c, i, 3)
                                             : match_llama3(&c, i, 1);
        buf->words[buf->n_words++] = buf->starts[end];
        i = end;
    }
}

void em_pretokenize_buf_free(em_pretokenize_buf *buf) {
    free(buf->cpts);
    free(buf->flags);
    free(buf->starts);
    free(buf->words);
    *buf = (em_pretokenize_buf){0};
}
