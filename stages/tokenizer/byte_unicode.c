/* GPT-2's byte-to-unicode table, computed from its definition: bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF stand for themselves; the others, in byte order, become U+0100, U+0101, ... */
#include "stages/tokenizer/byte_unicode.h"

#include <stdbool.h>

static bool printable(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t em_byte_to_unicode(uint8_t b) {
    if (printable(b)) return b;
    /* The n-th non-printable byte maps to 256 + n. */
    uint32_t n = 0;
    for (int x = 0; x < b; x++)
        if (!printable(x)) n++;
    return 256 + n;
}

int em_unicode_to_byte(uint32_t cpt) {
    if (cpt < 256) return printable((int)cpt) ? (int)cpt : -1;
    uint32_t n = 0;
    for (int x = 0; x < 256; x++) {
        if (printable(x)) continue;
        if (256 + n == cpt) return x;
        n++;
    }
    return -1;
}
