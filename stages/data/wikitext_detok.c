/* lm-evaluation-harness's wikitext detokenizer (see wikitext_detok.h). */
#include "stages/data/wikitext_detok.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* A growable output string. */
typedef struct buf {
    char *s;
    size_t len, cap;
} buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 256;
        b->s = em_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

/* Python's str.replace(from, to): one pass, left to right, matches do not overlap. */
static buf replace(buf in, const char *from, const char *to) {
    buf out = {0};
    size_t n = strlen(from), m = strlen(to);
    size_t i = 0;
    while (i < in.len) {
        if (i + n <= in.len && memcmp(in.s + i, from, n) == 0) {
            put(&out, to, m);
            i += n;
        } else {
            put(&out, in.s + i, 1);
            i++;
        }
    }
    put(&out, "", 0);
    free(in.s);
    return out;
}

/* re.sub(r"/' [0-9]/", r"/'[0-9]/"): the replacement is the literal text "/'[0-9]/". */
static buf slash_quote_digit(buf in) {
    buf out = {0};
    size_t i = 0;
    while (i < in.len) {
        const char *p = in.s + i;
        if (i + 5 <= in.len && p[0] == '/' && p[1] == '\'' && p[2] == ' ' && p[3] >= '0' &&
            p[3] <= '9' && p[4] == '/') {
            put(&out, "/'[0-9]/", 8);
            i += 5;
        } else {
            put(&out, p, 1);
            i++;
        }
    }
    put(&out, "", 0);
    free(in.s);
    return out;
}

/* The length of the Python-\s character at s (Unicode whitespace), or 0. */
static size_t space_at(const char *s, size_t avail) {
    const unsigned char *u = (const unsigned char *)s;
    if ((u[0] >= 0x09 && u[0] <= 0x0D) || (u[0] >= 0x1C && u[0] <= 0x20)) return 1;
    if (avail >= 2 && u[0] == 0xC2 && (u[1] == 0x85 || u[1] == 0xA0)) return 2;
    if (avail >= 3 && u[0] == 0xE1 && u[1] == 0x9A && u[2] == 0x80) return 3; /* U+1680 */
    if (avail >= 3 && u[0] == 0xE2 && u[1] == 0x80 &&
        ((u[2] >= 0x80 && u[2] <= 0x8A) || u[2] == 0xA8 || u[2] == 0xA9 || u[2] == 0xAF))
        return 3; /* U+2000-200A, 2028, 2029, 202F */
    if (avail >= 3 && u[0] == 0xE2 && u[1] == 0x81 && u[2] == 0x9F) return 3; /* U+205F */
    if (avail >= 3 && u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x80) return 3; /* U+3000 */
    return 0;
}

/* The length of the whitespace character ending just before s + end, or 0. */
static size_t space_before(const char *s, size_t end) {
    for (size_t n = 1; n <= 3 && n <= end; n++)
        if (space_at(s + end - n, n) == n) return n;
    return 0;
}

/* re.sub(r"O\s*([^C]*?)\s*C", r"O\1C"): the text between an opening character and the next
 * closing one loses its leading and trailing whitespace. */
static buf tighten(buf in, char open, char close) {
    buf out = {0};
    size_t i = 0;
    while (i < in.len) {
        const char *end = in.s[i] == open ? memchr(in.s + i + 1, close, in.len - i - 1) : NULL;
        if (!end) {
            put(&out, in.s + i, 1);
            i++;
            continue;
        }
        size_t a = i + 1, b = (size_t)(end - in.s), n;
        while (a < b && (n = space_at(in.s + a, b - a)) > 0) a += n;
        while (b > a && (n = space_before(in.s, b)) > 0 && b - n >= a) b -= n;
        put(&out, &open, 1);
        put(&out, in.s + a, b - a);
        put(&out, &close, 1);
        i = (size_t)(end - in.s) + 1;
    }
    put(&out, "", 0);
    free(in.s);
    return out;
}

char *em_wikitext_detokenize(const char *text, size_t len, size_t *out_len) {
    buf b = {0};
    put(&b, text, len);
    put(&b, "", 0);
    /* contractions */
    b = replace(b, "s '", "s'");
    b = slash_quote_digit(b);
    /* number separators */
    b = replace(b, " @-@ ", "-");
    b = replace(b, " @,@ ", ",");
    b = replace(b, " @.@ ", ".");
    /* punctuation */
    b = replace(b, " : ", ": ");
    b = replace(b, " ; ", "; ");
    b = replace(b, " . ", ". ");
    b = replace(b, " ! ", "! ");
    b = replace(b, " ? ", "? ");
    b = replace(b, " , ", ", ");
    /* double brackets */
    b = tighten(b, '(', ')');
    b = tighten(b, '[', ']');
    b = tighten(b, '{', '}');
    b = tighten(b, '"', '"');
    b = tighten(b, '\'', '\'');
    /* miscellaneous */
    b = replace(b, "= = = =", "====");
    b = replace(b, "= = =", "===");
    b = replace(b, "= =", "==");
    b = replace(b, " \xc2\xb0 ", "\xc2\xb0");
    b = replace(b, " \n", "\n");
    b = replace(b, "\n ", "\n");
    b = replace(b, " N ", " 1 ");
    b = replace(b, " 's", "'s");
    *out_len = b.len;
    return b.s;
}
