/* A growing string (see strbuf.h). */
#include "stages/report/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

static void reserve(em_strbuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = em_xrealloc(b->data, cap);
    b->cap = cap;
}

void em_strbuf_addn(em_strbuf *b, const char *s, size_t n) {
    reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void em_strbuf_add(em_strbuf *b, const char *s) {
    em_strbuf_addn(b, s, strlen(s));
}

void em_strbuf_printf(em_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *em_strbuf_take(em_strbuf *b) {
    char *s = b->data ? b->data : em_xstrdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}
