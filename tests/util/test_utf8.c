/* util/utf8.h: decoding one character (checked and unchecked) and the offset of the first invalid
 * byte. */
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "util/utf8.h"

static void test_utf8(void) {
    uint32_t cp = 0;
    CHECK_INT_EQ(em_utf8_decode_checked("A", 1, &cp), 1);
    CHECK_INT_EQ(cp, 0x41);
    CHECK_INT_EQ(em_utf8_decode_checked("\xc3\xa9", 2, &cp), 2);
    CHECK_INT_EQ(cp, 0xE9);
    CHECK_INT_EQ(em_utf8_decode_checked("\xe2\x82\xac", 3, &cp), 3);
    CHECK_INT_EQ(cp, 0x20AC);
    CHECK_INT_EQ(em_utf8_decode_checked("\xf0\x9f\x98\x80", 4, &cp), 4);
    CHECK_INT_EQ(cp, 0x1F600);
    cp = 7;
    CHECK_INT_EQ(em_utf8_decode_checked("\xe2\x82", 2, &cp), 0);         /* truncated */
    CHECK_INT_EQ(em_utf8_decode_checked("\xc1\xbf", 2, &cp), 0);         /* overlong */
    CHECK_INT_EQ(em_utf8_decode_checked("\xed\xa0\x80", 3, &cp), 0);     /* surrogate */
    CHECK_INT_EQ(em_utf8_decode_checked("\xf4\x90\x80\x80", 4, &cp), 0); /* past U+10FFFF */
    CHECK_INT_EQ(em_utf8_decode_checked("\x80", 1, &cp), 0);             /* a continuation */
    CHECK_INT_EQ(cp, 7);
    int n = 0;
    CHECK_INT_EQ(em_utf8_decode("\xe2\x82\xac", &n), 0x20AC);
    CHECK_INT_EQ(n, 3);
    CHECK_INT_EQ(em_utf8_decode("\xf4\x8f\xbf\xbf", &n), 0x10FFFF);
    CHECK_INT_EQ(n, 4);
    const char text[] = "h\xc3\xa9llo \xf0\x9f\x98\x80 \xf8";
    CHECK_INT_EQ(em_utf8_invalid_offset(text, strlen(text)), strlen(text) - 1);
    CHECK_INT_EQ(em_utf8_invalid_offset(text, strlen(text) - 1), strlen(text) - 1);
    CHECK_INT_EQ(em_utf8_invalid_offset("", 0), 0);
}

int main(void) {
    test_utf8();
    return test_finish();
}
