/* A small backtracking regular-expression engine for the pre-tokenizer expressions llama.cpp
 * uses, with the semantics of its fallback (C++ std::regex, ECMAScript): ordered alternation,
 * greedy and lazy quantifiers ({m,n} too), groups, lookahead (?= ) (?! ), classes with ranges
 * and \s \d \w, anchors ^ $ \b. It matches "units", not text: an expression naming a Unicode
 * category (\p{L}, \p{N}, \p{P}, \p{M}, \p{S}, \p{Lu}...) runs "collapsed", as llama.cpp does it:
 * every character of 128 or more becomes one unit standing for its category (so \p{Lu} is any
 * letter), and the expression may hold ASCII only; any other expression runs on codepoints. In
 * both, whitespace of 128 or more reads as \v (std::regex's \s is ASCII only). */
#ifndef EVALMESH_TOKENIZER_PRE_REGEX_H
#define EVALMESH_TOKENIZER_PRE_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct em_regex em_regex;

/* Compiles pattern (UTF-8). An unsupported or malformed pattern is an error (exit status 2)
 * naming `source` and the offset in the pattern. */
em_status em_regex_compile(const char *pattern, const char *source, em_regex **out);
void em_regex_free(em_regex *re);

/* Whether the expression runs on collapsed units (it names a Unicode category). */
bool em_regex_collapsed(const em_regex *re);

/* The unit a codepoint becomes: collapsed or not. */
uint32_t em_regex_unit(uint32_t cpt, bool collapsed);

/* Backtracking scratch space reused between calls. */
typedef struct em_regex_stack {
    struct em_regex_frame *frames;
    size_t count, capacity;
} em_regex_stack;
void em_regex_stack_free(em_regex_stack *st);

/* Where the pieces of a text end (indices), in order: they cover it from index 0 without gaps,
 * and an empty piece is never added. */
typedef struct em_piece_ends {
    size_t *data;
    size_t count, capacity;
} em_piece_ends;

static inline void em_piece_ends_push(em_piece_ends *e, size_t end) {
    if (end == (e->count ? e->data[e->count - 1] : 0)) return; /* an empty piece */
    if (e->count == e->capacity) {
        e->capacity = e->capacity ? 2 * e->capacity : 256;
        e->data = em_xrealloc(e->data, e->capacity * sizeof(size_t));
    }
    e->data[e->count++] = end;
}

/* Splits units[0..n) as llama.cpp's std::regex_iterator loop does: each match is a piece and so
 * is each stretch between matches; after an empty match the search resumes one unit later
 * unless a non-empty match starts there. Appends base + the end of each piece to *out. */
void em_regex_split(const em_regex *re, const uint32_t *units, size_t n, size_t base,
                    em_regex_stack *st, em_piece_ends *out);

#endif
