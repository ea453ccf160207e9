/* A growable NUL-terminated string that text is appended to (allocation never fails: em_xrealloc).
 */
#ifndef EVALMESH_TEXT_BUFFER_H
#define EVALMESH_TEXT_BUFFER_H

#include <stddef.h>

typedef struct em_text_buffer {
    char *s; /* NULL until the first append; then NUL-terminated, freed by the owner */
    size_t len, cap;
} em_text_buffer;

/* Appends n bytes of s. */
void em_text_buffer_put(em_text_buffer *b, const char *s, size_t n);
/* Appends the string s. */
void em_text_buffer_puts(em_text_buffer *b, const char *s);

#endif
