/* GPT-2's byte-to-unicode table, from its definition: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF
 * stand for themselves; the other 68, in byte order (0x00..0x20, 0x7F..0xA0, 0xAD), become
 * U+0100, U+0101, ... U+0143. */
#include "stages/tokenizer/byte_unicode.h"

uint32_t em_byte_to_unicode(uint8_t b) {
    if (b <= 0x20) return 256u + b;                        /* the 33 bytes 0x00..0x20 */
    if (b >= 0x7F && b <= 0xA0) return 289u + (b - 0x7Fu); /* the next 34 */
    if (b == 0xAD) return 323u;                            /* the last one */
    return b;
}

int em_unicode_to_byte(uint32_t cpt) {
    if (cpt < 256) return em_byte_to_unicode((uint8_t)cpt) == cpt ? (int)cpt : -1;
    if (cpt < 289) return (int)(cpt - 256);
    if (cpt < 323) return (int)(0x7F + (cpt - 289));
    if (cpt == 323) return 0xAD;
    return -1;
}
