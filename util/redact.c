/* Finding and replacing secrets inside URLs (see redact.h). */
#include "util/redact.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Parts of a query parameter's name (compared without case) that mark its value as a secret. */
static const char *const secret_names[] = {"token",     "key",        "secret", "password",
                                           "passwd",    "sig",        "auth",   "credential",
                                           "signature", "session_id", "pwd"};

static bool secret_name(const char *name, size_t len) {
    char lower[128];
    if (len >= sizeof lower) len = sizeof lower - 1;
    for (size_t i = 0; i < len; i++) lower[i] = (char)tolower((unsigned char)name[i]);
    lower[len] = 0;
    for (size_t i = 0; i < sizeof secret_names / sizeof *secret_names; i++)
        if (strstr(lower, secret_names[i])) return true;
    return false;
}

static bool url_char(char c) {
    return c && !isspace((unsigned char)c) && !strchr("\"'<>`", c);
}

/* Growable output. */
typedef struct out_buf {
    char *s;
    size_t len, cap;
} out_buf;

static void put(out_buf *o, const char *s, size_t n) {
    if (o->len + n + 1 > o->cap) {
        while (o->len + n + 1 > o->cap) o->cap = o->cap ? 2 * o->cap : 256;
        o->s = em_xrealloc(o->s, o->cap);
    }
    memcpy(o->s + o->len, s, n);
    o->len += n;
    o->s[o->len] = 0;
}

/* Copies the URL [url, end) to o (o may be NULL), redacting; returns how many parts it replaced. */
static int redact_url(const char *url, const char *end, out_buf *o) {
    int replaced = 0;
    const char *auth = strstr(url, "://") + 3;
    const char *auth_end = auth;
    while (auth_end < end && !strchr("/?#", *auth_end)) auth_end++;
    const char *at = NULL;
    for (const char *p = auth; p < auth_end; p++)
        if (*p == '@') at = p;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    const char *p = url;
    if (colon) {
        if (o) put(o, p, (size_t)(colon + 1 - p));
        if (o) put(o, EM_REDACTED, strlen(EM_REDACTED));
        p = at;
        replaced++;
    }
    const char *query = memchr(auth_end, '?', (size_t)(end - auth_end));
    const char *fragment = query ? memchr(query, '#', (size_t)(end - query)) : NULL;
    const char *query_end = fragment ? fragment : end;
    for (const char *q = query ? query + 1 : end; q < query_end;) {
        const char *amp = q;
        while (amp < query_end && *amp != '&' && *amp != ';') amp++;
        const char *eq = memchr(q, '=', (size_t)(amp - q));
        if (eq && eq + 1 < amp && secret_name(q, (size_t)(eq - q))) {
            if (o) put(o, p, (size_t)(eq + 1 - p));
            if (o) put(o, EM_REDACTED, strlen(EM_REDACTED));
            p = amp;
            replaced++;
        }
        q = amp < query_end ? amp + 1 : amp;
    }
    if (o) put(o, p, (size_t)(end - p));
    return replaced;
}

/* Walks the URLs in text: each one is copied redacted to o (when not NULL), the text between them
 * as it is. Returns how many parts were replaced. */
static int walk(const char *text, out_buf *o) {
    int replaced = 0;
    const char *p = text;
    for (const char *sep; (sep = strstr(p, "://"));) {
        const char *start = sep;
        while (start > p && (isalnum((unsigned char)start[-1]) || strchr("+.-", start[-1])))
            start--;
        const char *end = sep + 3;
        while (url_char(*end)) end++;
        if (o) put(o, p, (size_t)(start - p));
        if (start < sep)
            replaced += redact_url(start, end, o);
        else if (o)
            put(o, start, (size_t)(end - start));
        p = end;
    }
    if (o) put(o, p, strlen(p));
    return replaced;
}

char *em_redact_urls(const char *text) {
    out_buf o = {0};
    walk(text, &o);
    if (!o.s) return em_xstrdup("");
    return o.s;
}

bool em_has_url_secret(const char *text) {
    return walk(text, NULL) > 0;
}
