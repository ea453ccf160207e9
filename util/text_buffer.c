/* A growable string (text_buffer.h). */
#include "util/text_buffer.h"

#include <string.h>

#include "util/error.h"

void em_text_buffer_put(em_text_buffer *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 256;
        b->s = em_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void em_text_buffer_puts(em_text_buffer *b, const char *s) {
    em_text_buffer_put(b, s, strlen(s));
}
