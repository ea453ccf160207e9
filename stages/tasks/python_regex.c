/* Python `re` patterns translated to POSIX extended regular expressions and run with Python's
 * findall rules (python_regex.h). */
#include "stages/tasks/python_regex.h"

#include <locale.h>
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/text_buffer.h"
#include "util/utf8.h"

struct em_python_regex {
    regex_t compiled;
    size_t python_groups; /* Python's capturing groups */
    size_t posix_groups;  /* POSIX's: Python's plus one per (?:...) */
    size_t *posix_of;     /* python_groups: the POSIX group of each Python group */
    bool dollar;          /* the pattern has a '$', which Python also matches before a final
                             newline */
};

/* The C.UTF-8 locale, so that regcomp and regexec take a code point as one character. */
static locale_t utf8_locale(void) {
    static locale_t loc;
    if (!loc) loc = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
    return loc;
}

/* The byte length of the character at s (1 for a byte that is not valid UTF-8). */
static size_t char_len(const char *s) {
    uint32_t cp;
    size_t n = em_utf8_decode_checked(s, strlen(s) < 4 ? strlen(s) : 4, &cp);
    return n ? n : 1;
}

static em_status refuse(const char *what, const char *pattern, size_t at, const char *why) {
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "%s: the pattern '%s' at character %zu: %s (docs/tasks.md lists the "
                        "Python regular expressions evalmesh runs)",
                        what, pattern, at + 1, why);
}

/* Python's \s: the code points str.isspace is true for (glibc's [:space:] lacks U+0085, U+00A0,
 * U+2007 and U+202F), without ranges beyond ASCII, whose order a locale may change. */
#define PYTHON_SPACE                                                                               \
    "\t\n\v\f\r\x1c-\x1f \xc2\x85\xc2\xa0\xe1\x9a\x80\xe2\x80\x80\xe2\x80\x81\xe2\x80\x82\xe2"     \
    "\x80\x83\xe2\x80\x84\xe2\x80\x85\xe2\x80\x86\xe2\x80\x87\xe2\x80\x88\xe2\x80\x89\xe2\x80\x8a" \
    "\xe2"                                                                                         \
    "\x80\xa8\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\x9f\xe3\x80\x80"

/* The character a Python escape \c stands for when it is one (\n \t \r \f \v), else 0. */
static char control_escape(char c) {
    switch (c) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    default:
        return 0;
    }
}

static bool is_ascii_alnum(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* One Python bracket class at p[*i] ('['): written as a POSIX bracket expression. */
static em_status translate_class(const char *p, size_t *i, const char *what, em_text_buffer *out) {
    size_t start = *i, k = *i + 1;
    bool negated = p[k] == '^';
    if (negated) k++;
    em_text_buffer ranges = {0}, singles = {0}, names = {0};
    bool close = false, dash = false, caret = false, open = false;
    size_t members = 0;
    em_status err = NULL;
    for (bool first = true; !err; first = false) {
        if (!p[k]) {
            err = refuse(what, p, start, "a '[' without its ']'");
            break;
        }
        if (p[k] == ']' && !first) break;
        /* one member: a character (bytes) or a class name */
        char single[5] = {0};
        if (p[k] == '\\') {
            char c = p[k + 1];
            if (c == 'd' || c == 's' || c == 'w') {
                em_text_buffer_puts(&names, c == 'd'   ? "0-9"
                                            : c == 's' ? PYTHON_SPACE
                                                       : "[:alnum:]_");
                members++;
                k += 2;
                continue;
            }
            if (control_escape(c))
                single[0] = control_escape(c);
            else if (c && !is_ascii_alnum(c))
                memcpy(single, p + k + 1, char_len(p + k + 1));
            else
                err = refuse(what, p, k,
                             c == 'D' || c == 'S' || c == 'W'
                                 ? "\\D, \\S and \\W inside a bracket class are not supported"
                                 : "this escape is not supported");
            if (err) break;
            k += 1 + strlen(single);
        } else {
            size_t n = char_len(p + k);
            memcpy(single, p + k, n);
            k += n;
        }
        if (p[k] == '-' && p[k + 1] && p[k + 1] != ']') {
            /* a range single-end */
            char end[5] = {0};
            size_t e = k + 1;
            if (p[e] == '\\') {
                char c = p[e + 1];
                if (control_escape(c))
                    end[0] = control_escape(c);
                else if (c && !is_ascii_alnum(c))
                    end[0] = c;
                else {
                    err = refuse(what, p, e, "this escape cannot end a range");
                    break;
                }
                e += 2;
            } else {
                size_t n = char_len(p + e);
                memcpy(end, p + e, n);
                e += n;
            }
            if ((unsigned char)single[0] >= 0x80 || (unsigned char)end[0] >= 0x80 ||
                strchr("]-[^", single[0]) || strchr("]-[^", end[0])) {
                err = refuse(what, p, k - strlen(single),
                             "a range must run between ASCII characters other than ] - [ ^");
                break;
            }
            if ((unsigned char)single[0] > (unsigned char)end[0]) {
                err = refuse(what, p, k - strlen(single), "a range out of order");
                break;
            }
            em_text_buffer_put(&ranges, single, 1);
            em_text_buffer_put(&ranges, "-", 1);
            em_text_buffer_put(&ranges, end, 1);
            members++;
            k = e;
            continue;
        }
        members++;
        if (single[0] == ']')
            close = true;
        else if (single[0] == '-')
            dash = true;
        else if (single[0] == '^')
            caret = true;
        else if (single[0] == '[')
            open = true;
        else
            em_text_buffer_puts(&singles, single);
    }
    if (!err) {
        *i = k + 1;
        if (!negated && members == 1 && caret) {
            em_text_buffer_puts(out, "\\^");
        } else {
            /* POSIX: ']' first, '-' last, '^' anywhere but first, '[' before no ':' '.' '=' */
            em_text_buffer_puts(out, negated ? "[^" : "[");
            if (close) em_text_buffer_puts(out, "]");
            if (ranges.s) em_text_buffer_puts(out, ranges.s);
            if (singles.s) em_text_buffer_puts(out, singles.s);
            if (names.s) em_text_buffer_puts(out, names.s);
            if (open) em_text_buffer_puts(out, "[");
            if (caret) em_text_buffer_puts(out, "^");
            if (dash) em_text_buffer_puts(out, "-");
            em_text_buffer_puts(out, "]");
        }
    }
    free(ranges.s);
    free(singles.s);
    free(names.s);
    return err;
}

/* Python's {m}, {m,}, {,n}, {m,n} at p[*i] ('{'): written as a POSIX interval; false when it is
 * no quantifier (then '{' is a literal). */
static bool translate_interval(const char *p, size_t *i, em_text_buffer *out) {
    size_t k = *i + 1, lo = k;
    while (p[k] >= '0' && p[k] <= '9') k++;
    size_t lo_end = k, hi = k, hi_end = k;
    bool comma = p[k] == ',';
    if (comma) {
        hi = ++k;
        while (p[k] >= '0' && p[k] <= '9') k++;
        hi_end = k;
    }
    if (p[k] != '}' || k == *i + 1) return false;
    em_text_buffer_puts(out, "{");
    if (lo_end > lo)
        em_text_buffer_put(out, p + lo, lo_end - lo);
    else
        em_text_buffer_puts(out, "0");
    if (comma) {
        em_text_buffer_puts(out, ",");
        em_text_buffer_put(out, p + hi, hi_end - hi);
    }
    em_text_buffer_puts(out, "}");
    *i = k + 1;
    return true;
}

em_status em_python_regex_compile(const char *pattern, const char *what, em_python_regex **out) {
    em_text_buffer ere = {0};
    em_text_buffer_puts(&ere, "");
    size_t *kinds = NULL, posix = 0, python = 0; /* kinds[g]: Python group number, 0 hidden */
    em_status err = NULL;
    bool dollar = false, dotall = strncmp(pattern, "(?s)", 4) == 0;
    for (size_t i = dotall ? 4 : 0; pattern[i] && !err;) {
        char c = pattern[i];
        if (c == '$') dollar = true;
        if (c == '\\') {
            char e = pattern[i + 1];
            if (!e) {
                err = refuse(what, pattern, i, "a trailing backslash");
            } else if (strchr("dDsSwW", e)) {
                static const char *const classes[] = {
                    "[0-9]",        "[^0-9]",       "[" PYTHON_SPACE "]", "[^" PYTHON_SPACE "]",
                    "[[:alnum:]_]", "[^[:alnum:]_]"};
                static const char kinds[] = "dDsSwW";
                em_text_buffer_puts(&ere, classes[strchr(kinds, e) - kinds]);
                i += 2;
            } else if (control_escape(e)) {
                char lit = control_escape(e);
                em_text_buffer_put(&ere, &lit, 1);
                i += 2;
            } else if (is_ascii_alnum(e)) {
                err = refuse(what, pattern, i,
                             e >= '0' && e <= '9'  ? "back-references are not supported"
                             : strchr("bBAZzG", e) ? "the anchors \\b \\B \\A \\Z are not supported"
                                                   : "this escape is not supported");
            } else {
                size_t n = char_len(pattern + i + 1);
                if (strchr(".[]{}()*+?|^$\\", e)) em_text_buffer_puts(&ere, "\\");
                em_text_buffer_put(&ere, pattern + i + 1, n);
                i += 1 + n;
            }
            continue;
        }
        if (c == '[') {
            err = translate_class(pattern, &i, what, &ere);
            continue;
        }
        if (c == '(') {
            bool hidden = false;
            if (pattern[i + 1] == '?') {
                if (pattern[i + 2] != ':') {
                    err = refuse(what, pattern, i,
                                 "(?...) other than (?:...) (look-around, named groups, flags) is "
                                 "not supported");
                    break;
                }
                hidden = true;
            }
            kinds = em_xrealloc(kinds, (posix + 1) * sizeof *kinds);
            kinds[posix++] = hidden ? 0 : ++python;
            em_text_buffer_puts(&ere, "(");
            i += hidden ? 3 : 1;
            continue;
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (c == '{') {
                if (!translate_interval(pattern, &i, &ere)) {
                    em_text_buffer_puts(&ere, "\\{");
                    i++;
                    continue;
                }
            } else {
                em_text_buffer_put(&ere, &c, 1);
                i++;
            }
            if (pattern[i] == '?' || pattern[i] == '+')
                err = refuse(what, pattern, i,
                             "lazy (*? +? ?? {m,n}?) and possessive quantifiers are not supported");
            continue;
        }
        if (c == '.') {
            em_text_buffer_puts(&ere, dotall ? "." : "[^\n]");
            i++;
            continue;
        }
        if (c == '}') {
            em_text_buffer_puts(&ere, "\\}");
            i++;
            continue;
        }
        size_t n = char_len(pattern + i);
        em_text_buffer_put(&ere, pattern + i, n);
        i += n;
    }
    em_python_regex *re = NULL;
    if (!err) {
        locale_t loc = utf8_locale();
        if (!loc) {
            err = em_error_new(EM_EXIT_RUNTIME, "%s: the C.UTF-8 locale is not available", what);
        } else {
            re = em_xcalloc(1, sizeof *re);
            locale_t old = uselocale(loc);
            int rc = regcomp(&re->compiled, ere.s, REG_EXTENDED);
            uselocale(old);
            if (rc) {
                char message[256];
                regerror(rc, &re->compiled, message, sizeof message);
                err = em_error_new(EM_EXIT_BAD_INPUT, "%s: the pattern '%s' is invalid: %s", what,
                                   pattern, message);
                free(re);
                re = NULL;
            }
        }
    }
    if (re) {
        re->python_groups = python;
        re->posix_groups = posix;
        re->dollar = dollar;
        re->posix_of = em_xcalloc(python ? python : 1, sizeof *re->posix_of);
        for (size_t g = 0; g < posix; g++)
            if (kinds[g]) re->posix_of[kinds[g] - 1] = g + 1;
        *out = re;
    }
    free(kinds);
    free(ere.s);
    return err;
}

void em_python_regex_free(em_python_regex *re) {
    if (!re) return;
    regfree(&re->compiled);
    free(re->posix_of);
    free(re);
}

size_t em_python_regex_groups(const em_python_regex *re) {
    return re->python_groups;
}

/* regexec on text[pos..len) (len <= strlen(text)): true with m filled when it matches. */
static bool search(const em_python_regex *re, const char *text, size_t pos, size_t len,
                   regmatch_t *m) {
    char *part = em_xmalloc(len - pos + 1);
    memcpy(part, text + pos, len - pos);
    part[len - pos] = '\0';
    locale_t old = uselocale(utf8_locale());
    int rc = regexec(&re->compiled, part, re->posix_groups + 1, m, pos ? REG_NOTBOL : 0);
    uselocale(old);
    free(part);
    return rc == 0;
}

bool em_python_regex_next(const em_python_regex *re, const char *text, em_regex_cursor *cursor,
                          em_regex_span *spans) {
    if (cursor->done) return false;
    size_t len = strlen(text), pos = cursor->pos;
    regmatch_t *m = em_xmalloc(2 * (re->posix_groups + 1) * sizeof *m);
    bool found = search(re, text, pos, len, m);
    /* Python's '$' also matches before a final newline: the text without it is searched too,
     * and the match that starts first (the longer where both start at one place) is taken */
    if (re->dollar && len > pos && text[len - 1] == '\n') {
        regmatch_t *cut = m + re->posix_groups + 1;
        if (search(re, text, pos, len - 1, cut) &&
            (!found || cut[0].rm_so < m[0].rm_so ||
             (cut[0].rm_so == m[0].rm_so && cut[0].rm_eo > m[0].rm_eo))) {
            memcpy(m, cut, (re->posix_groups + 1) * sizeof *m);
            found = true;
        }
    }
    if (!found) {
        cursor->done = true;
        free(m);
        return false;
    }
    spans[0].start = (long)pos + m[0].rm_so;
    spans[0].end = (long)pos + m[0].rm_eo;
    for (size_t g = 0; g < re->python_groups; g++) {
        const regmatch_t *gm = &m[re->posix_of[g]];
        spans[1 + g].start = gm->rm_so < 0 ? -1 : (long)pos + gm->rm_so;
        spans[1 + g].end = gm->rm_so < 0 ? -1 : (long)pos + gm->rm_eo;
    }
    free(m);
    /* POSIX's match at the leftmost place is the longest there: an empty one means no other
     * starts at that place, so the search goes on a character later. */
    size_t end = (size_t)spans[0].end;
    if (spans[0].start == spans[0].end) {
        if (end >= len)
            cursor->done = true;
        else
            cursor->pos = end + char_len(text + end);
    } else {
        cursor->pos = end;
    }
    return true;
}

char *em_python_regex_remove(const em_python_regex *re, const char *text) {
    em_text_buffer out = {0};
    em_text_buffer_puts(&out, "");
    em_regex_cursor cursor = {0};
    em_regex_span *spans = em_xmalloc((re->python_groups + 1) * sizeof *spans);
    size_t kept = 0;
    while (em_python_regex_next(re, text, &cursor, spans)) {
        em_text_buffer_put(&out, text + kept, (size_t)spans[0].start - kept);
        kept = (size_t)spans[0].end;
    }
    em_text_buffer_puts(&out, text + kept);
    free(spans);
    return out.s;
}
