/* The pre-tokenizer driver: applies each expression of a pre-tokenizer to the pieces the previous
 * one left, with llama.cpp's hand-written matchers for the expressions it special-cases (GPT-2,
 * Llama 3, Kimi K2, AFMoE digits) and the regex engine for the others; and UTF-8 helpers. */
#include "stages/tokenizer/pretokenizer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "stages/tokenizer/pre_table.h"
#include "util/error.h"
#include "util/utf8.h"

/* Character classes. Every codepoint inside the text has F_IN; past either end flags are 0. */
enum { F_IN = 1, F_LETTER = 2, F_NUMBER = 4, F_SPACE = 8 };

bool em_is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static uint8_t classify(uint32_t c) {
    uint8_t f = F_IN;
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return f | F_LETTER;
        if (c >= '0' && c <= '9') return f | F_NUMBER;
        if (em_is_white_space(c)) return f | F_SPACE;
        return f;
    }
    if (em_is_white_space(c)) f |= F_SPACE;
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

/* What Llama 3's and Kimi K2's rules share after their word rules: \p{N}{1,3},
 * ' ?[^\s\p{L}\p{N}]+[\r\n]*', \s*[\r\n]+, \s+(?!\S), \s+. */
static size_t llama3_tail(const cursor *c, size_t i) {
    uint32_t cpt = c->cpts[i];
    uint8_t f = c->flags[i];
    if (f & F_NUMBER) {
        size_t j = i;
        while (j < i + 3 && (flags_at(c, j) & F_NUMBER)) j++;
        return j;
    }
    size_t j = i + (cpt == ' ');
    uint8_t g = flags_at(c, j);
    if (f && !(g & (F_SPACE | F_LETTER | F_NUMBER))) {
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

static size_t match_llama3(const cursor *c, size_t i) {
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
    return llama3_tail(c, i);
}

/* Han characters as llama.cpp's Kimi K2 rules count them (CJK ideograph blocks). */
static bool is_han(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2EBEF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool letter_not_han(const cursor *c, size_t i) {
    return (flags_at(c, i) & F_LETTER) && !is_han(c->cpts[i]);
}

/* Kimi K2: [\p{Han}]+ | [^\r\n\p{L}\p{N}]? then non-Han letters and an optional contraction
 * | Llama 3's tail. */
static size_t match_kimi_k2(const cursor *c, size_t i) {
    uint32_t cpt = c->cpts[i];
    uint8_t f = c->flags[i];
    if (is_han(cpt)) {
        size_t j = i;
        while (j < c->n && is_han(c->cpts[j])) j++;
        return j;
    }
    bool lead = !(cpt == '\r' || cpt == '\n' || (f & (F_LETTER | F_NUMBER)));
    if (letter_not_han(c, i) || (lead && letter_not_han(c, i + 1))) {
        size_t j = i + lead;
        while (letter_not_han(c, j)) j++;
        return j + contraction(c, j, true);
    }
    return llama3_tail(c, i);
}

/* AFMoE's digit rule: each run of numbers splits into a leading 1 or 2 (its length mod 3) and
 * groups of 3; as in llama.cpp, the text before a run joins its first group. */
static void split_afmoe_digits(const cursor *c, size_t base, em_piece_ends *out) {
    for (size_t i = 0; i < c->n;) {
        if (!(c->flags[i] & F_NUMBER)) {
            i++;
            continue;
        }
        size_t run = 0;
        while (flags_at(c, i + run) & F_NUMBER) run++;
        size_t at = i + run % 3;
        if (at > i) em_piece_ends_push(out, base + at);
        for (; at < i + run; at += 3) em_piece_ends_push(out, base + at + 3);
        i += run;
    }
    if (c->n) em_piece_ends_push(out, base + c->n);
}

typedef enum expr_kind { X_REGEX, X_GPT2, X_LLAMA3, X_KIMI_K2, X_AFMOE_DIGITS } expr_kind;

/* The expressions llama.cpp runs with hand-written code, spelled exactly as it checks them. */
static const struct {
    const char *expr;
    expr_kind kind;
} CUSTOM[] = {
    {EM_PRE_GPT2_EXPR, X_GPT2},
    {EM_PRE_LLAMA3_EXPR, X_LLAMA3},
    {EM_PRE_LLAMA3_HF_EXPR, X_LLAMA3},
    {"\\p{Han}+", X_KIMI_K2},
    {"\\p{AFMoE_digits}", X_AFMOE_DIGITS},
};

struct em_pretokenizer {
    size_t n;
    expr_kind kinds[EM_PRE_MAX_EXPRS];
    em_regex *regex[EM_PRE_MAX_EXPRS];
};

em_status em_pretokenizer_new(const char *const *exprs, size_t n, const char *source,
                              em_pretokenizer **out) {
    *out = NULL;
    if (n > EM_PRE_MAX_EXPRS)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: more than %d pre-tokenizer expressions", source,
                            EM_PRE_MAX_EXPRS);
    em_pretokenizer *pre = em_xcalloc(1, sizeof(em_pretokenizer));
    pre->n = n;
    for (size_t k = 0; k < n; k++) {
        pre->kinds[k] = X_REGEX;
        for (size_t j = 0; j < sizeof(CUSTOM) / sizeof(CUSTOM[0]); j++)
            if (strcmp(exprs[k], CUSTOM[j].expr) == 0) pre->kinds[k] = CUSTOM[j].kind;
        if (pre->kinds[k] != X_REGEX) continue;
        em_status err = em_regex_compile(exprs[k], source, &pre->regex[k]);
        if (err) {
            em_pretokenizer_free(pre);
            return err;
        }
    }
    *out = pre;
    return NULL;
}

void em_pretokenizer_free(em_pretokenizer *pre) {
    if (!pre) return;
    for (size_t k = 0; k < pre->n; k++) em_regex_free(pre->regex[k]);
    free(pre);
}

static void reserve(em_pretokenize_buf *buf, size_t n) {
    if (n <= buf->capacity) return;
    size_t cap = buf->capacity ? buf->capacity : 256;
    while (cap < n) cap *= 2;
    buf->cpts = em_xrealloc(buf->cpts, cap * sizeof(uint32_t));
    buf->flags = em_xrealloc(buf->flags, cap);
    buf->units = em_xrealloc(buf->units, cap * sizeof(uint32_t));
    buf->starts = em_xrealloc(buf->starts, (cap + 1) * sizeof(size_t));
    buf->words = em_xrealloc(buf->words, cap * sizeof(size_t));
    buf->capacity = cap;
}

/* Splits one piece, cpts[begin..end), with expression k into out. */
static void split_piece(const em_pretokenizer *pre, size_t k, em_pretokenize_buf *buf, size_t begin,
                        size_t end, em_piece_ends *out) {
    cursor c = {buf->cpts + begin, buf->flags + begin, end - begin};
    switch (pre->kinds[k]) {
    case X_REGEX:
        em_regex_split(pre->regex[k], buf->units + begin, end - begin, begin, &buf->stack, out);
        return;
    case X_AFMOE_DIGITS:
        split_afmoe_digits(&c, begin, out);
        return;
    default:
        for (size_t i = 0; i < c.n;) {
            i = pre->kinds[k] == X_GPT2     ? match_gpt2(&c, i)
                : pre->kinds[k] == X_LLAMA3 ? match_llama3(&c, i)
                                            : match_kimi_k2(&c, i);
            em_piece_ends_push(out, begin + i);
        }
    }
}

void em_pretokenize(const em_pretokenizer *pre, const char *text, size_t len,
                    em_pretokenize_buf *buf) {
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
    em_piece_ends pieces[2] = {{buf->ends[0], 0, buf->cap_ends[0]},
                               {buf->ends[1], 0, buf->cap_ends[1]}};
    int cur = 0;
    if (n) em_piece_ends_push(&pieces[0], n);
    int units_mode = -1; /* what buf->units holds: -1 nothing, 0 codepoints, 1 collapsed */
    for (size_t k = 0; k < pre->n; k++) {
        if (pre->kinds[k] == X_REGEX && units_mode != em_regex_collapsed(pre->regex[k])) {
            units_mode = em_regex_collapsed(pre->regex[k]);
            for (size_t i = 0; i < n; i++)
                buf->units[i] = em_regex_unit(buf->cpts[i], units_mode == 1);
        }
        em_piece_ends *in = &pieces[cur], *out = &pieces[1 - cur];
        out->count = 0;
        size_t begin = 0;
        for (size_t p = 0; p < in->count; p++) {
            split_piece(pre, k, buf, begin, in->data[p], out);
            begin = in->data[p];
        }
        cur = 1 - cur;
    }
    buf->n_words = pieces[cur].count;
    for (size_t w = 0; w < buf->n_words; w++) buf->words[w] = buf->starts[pieces[cur].data[w]];
    for (int b = 0; b < 2; b++)
        buf->ends[b] = pieces[b].data, buf->cap_ends[b] = pieces[b].capacity;
}

void em_pretokenize_buf_free(em_pretokenize_buf *buf) {
    free(buf->cpts);
    free(buf->flags);
    free(buf->units);
    free(buf->starts);
    free(buf->words);
    free(buf->ends[0]);
    free(buf->ends[1]);
    em_regex_stack_free(&buf->stack);
    *buf = (em_pretokenize_buf){0};
}
