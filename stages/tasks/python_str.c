/* Python's str.lower, str.upper and str.strip() on UTF-8 text (python_str.h). */
#include "stages/tasks/python_str.h"

#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "stages/tasks/doc_template.h"
#include "util/error.h"
#include "util/utf8.h"

static size_t encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static locale_t utf8_ctype(void) {
    static locale_t loc;
    if (!loc) loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    return loc;
}

static uint32_t simple_case(uint32_t cp, bool upper) {
    locale_t loc = utf8_ctype();
    if (loc) return (uint32_t)(upper ? towupper_l(cp, loc) : towlower_l(cp, loc));
    if (upper) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
    return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
}

/* Unicode's Cased, as far as the simple mappings tell it: a letter with another case. */
static bool cased(uint32_t cp) {
    return simple_case(cp, false) != cp || simple_case(cp, true) != cp;
}

/* Unicode's Case_Ignorable for the characters text is likely to hold: the apostrophes, the
 * period, the colon, the modifier symbols of Latin-1, the soft hyphen, the middle dot and the
 * combining diacritical marks. */
static bool case_ignorable(uint32_t cp) {
    return cp == '\'' || cp == '.' || cp == ':' || cp == '^' || cp == '`' || cp == 0xA8 ||
           cp == 0xAD || cp == 0xAF || cp == 0xB4 || cp == 0xB7 || cp == 0xB8 || cp == 0x2018 ||
           cp == 0x2019 || (cp >= 0x300 && cp <= 0x36F);
}

/* Python's Final_Sigma rule for the capital sigma at cps[i] (n code points; UINT32_MAX for a
 * byte that is no UTF-8): a cased letter before it and none after it, case-ignorable ones
 * skipped, lowers it to the final sigma. */
static bool final_sigma(const uint32_t *cps, size_t n, size_t i) {
    size_t j = i;
    while (j > 0 && cps[j - 1] != UINT32_MAX && case_ignorable(cps[j - 1])) j--;
    if (j == 0 || cps[j - 1] == UINT32_MAX || !cased(cps[j - 1])) return false;
    size_t k = i + 1;
    while (k < n && cps[k] != UINT32_MAX && case_ignorable(cps[k])) k++;
    return k == n || cps[k] == UINT32_MAX || !cased(cps[k]);
}

static char *map_case(const char *text, bool upper) {
    size_t len = strlen(text), n = 0;
    uint32_t *cps = em_xmalloc((len + 1) * sizeof *cps);
    unsigned char *raw = em_xmalloc(len + 1); /* the byte of a cps[] that is UINT32_MAX */
    for (size_t i = 0; i < len; n++) {
        size_t k = em_utf8_decode_checked(text + i, len - i, &cps[n]);
        if (!k) {
            cps[n] = UINT32_MAX;
            raw[n] = (unsigned char)text[i];
            k = 1;
        }
        i += k;
    }
    /* a simple mapping changes a code point's UTF-8 length by at most one byte */
    char *out = em_xmalloc(len * 2 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (cps[i] == UINT32_MAX) {
            out[o++] = (char)raw[i];
            continue;
        }
        uint32_t mapped = !upper && cps[i] == 0x3A3 && final_sigma(cps, n, i)
                              ? 0x3C2
                              : simple_case(cps[i], upper);
        o += encode(mapped, out + o);
    }
    out[o] = '\0';
    free(cps);
    free(raw);
    return out;
}

char *em_python_lower(const char *text) {
    return map_case(text, false);
}
char *em_python_upper(const char *text) {
    return map_case(text, true);
}

char *em_python_strip(const char *text) {
    size_t len = strlen(text), start = 0, end = len;
    while (start < len) {
        uint32_t cp;
        size_t n = em_utf8_decode_checked(text + start, len - start, &cp);
        if (!n || !em_python_isspace(cp)) break;
        start += n;
    }
    while (end > start) {
        size_t b = end - 1;
        while (b > start && ((unsigned char)text[b] & 0xC0) == 0x80) b--;
        uint32_t cp;
        size_t n = em_utf8_decode_checked(text + b, end - b, &cp);
        if (n != end - b || !em_python_isspace(cp)) break;
        end = b;
    }
    char *out = em_xmalloc(end - start + 1);
    memcpy(out, text + start, end - start);
    out[end - start] = '\0';
    return out;
}
