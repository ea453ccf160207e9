/* GPT-2's byte-to-unicode mapping: byte-level BPE vocabularies spell each byte as a printable
 * character (printable Latin-1 bytes as themselves, the other 68 bytes as U+0100 onwards, so the
 * space 0x20 is "Ġ" U+0120 and the newline "Ċ" U+010A). */
#ifndef EVALMESH_TOKENIZER_BYTE_UNICODE_H
#define EVALMESH_TOKENIZER_BYTE_UNICODE_H

#include <stdint.h>

/* The codepoint that spells byte b. */
uint32_t em_byte_to_unicode(uint8_t b);
/* The byte a codepoint spells, or -1 when it is not one of the 256. */
int em_unicode_to_byte(uint32_t cpt);

#endif
