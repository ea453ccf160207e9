/* A growing string for building HTTP bodies, HTML and tables piece by piece. */
#ifndef EVALMESH_REPORT_STRBUF_H
#define EVALMESH_REPORT_STRBUF_H

#include <stddef.h>

typedef struct em_strbuf {
    char *data; /* always NUL-terminated once anything was added */
    size_t len;
    size_t cap;
} em_strbuf;

void em_strbuf_add(em_strbuf *b, const char *s);
void em_strbuf_addn(em_strbuf *b, const char *s, size_t n);
void em_strbuf_printf(em_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the string over (an empty string when nothing was added); the buffer is reset. */
char *em_strbuf_take(em_strbuf *b);

#endif
