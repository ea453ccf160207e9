/* UTF-8: decoding one character, and finding the first byte that is not valid UTF-8 (a bad lead
 * byte, a missing or bad continuation byte, an overlong form, a surrogate, or beyond U+10FFFF). */
#ifndef EVALMESH_UTF8_H
#define EVALMESH_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the character at s[0..len) into *cp; returns its byte length, 0 when it is not valid
 * UTF-8 (then *cp is unchanged). */
size_t em_utf8_decode_checked(const char *s, size_t len, uint32_t *cp);
/* Decodes the character at s, which must start valid UTF-8; *n receives its byte length. */
uint32_t em_utf8_decode(const char *s, int *n);
/* The offset of the first byte that is not part of valid UTF-8, or len when all of it is. */
size_t em_utf8_invalid_offset(const char *text, size_t len);

#endif
