/* Python `re` patterns (as lm-eval's regex filter and exact_match's regexes_to_ignore, and
 * BIG-bench's output_regex, write them) run on POSIX extended regular expressions (glibc's
 * regcomp/regexec under the C.UTF-8 locale, so a character is a code point). A pattern is
 * translated: \d \s \w and their negations become bracket classes, `.` does not match a newline
 * (Python without DOTALL), `(?:...)` becomes a group whose number is hidden, escapes inside a
 * bracket class are resolved, a `{` that is no quantifier is a literal. What POSIX cannot say is
 * refused with the pattern and the offending place named (exit 2): lazy and possessive
 * quantifiers, look-around, named groups, inline flags, back-references, \b \B \A \Z.
 * docs/tasks.md lists the subset and where the results can differ (POSIX takes the longest match
 * at the leftmost place, Python the first alternative that matches). */
#ifndef EVALMESH_TASKS_PYTHON_REGEX_H
#define EVALMESH_TASKS_PYTHON_REGEX_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

typedef struct em_python_regex em_python_regex;

/* A match's span, or a group's (start -1: the group took no part; Python's findall gives ""). */
typedef struct em_regex_span {
    long start, end; /* byte offsets into the text */
} em_regex_span;

/* Compiles pattern; `what` names where it comes from in errors ("regex_pattern (t.yaml:9:24)"). */
em_status em_python_regex_compile(const char *pattern, const char *what, em_python_regex **out);
void em_python_regex_free(em_python_regex *re);

/* The number of capturing groups as Python counts them (re.compile(p).groups). */
size_t em_python_regex_groups(const em_python_regex *re);

/* Python's finditer over text, one match per call: the first call with *pos = 0; fills spans
 * (1 + groups of them: the whole match, then each group) and returns true, or false when no
 * match is left. Empty matches follow Python 3.7+: one may come right after a non-empty match,
 * and after one the search goes on a character later. */
typedef struct em_regex_cursor {
    size_t pos;
    bool done;
} em_regex_cursor;
bool em_python_regex_next(const em_python_regex *re, const char *text, em_regex_cursor *cursor,
                          em_regex_span *spans);

/* re.sub(pattern, "", text): text without its matches (malloc'd). */
char *em_python_regex_remove(const em_python_regex *re, const char *text);

#endif
