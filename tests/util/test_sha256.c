/* SHA-256 (util/sha256.h) against the examples of FIPS 180-2 appendix B, one-shot and streamed
 * in uneven pieces (a million 'a's in 7-byte updates crosses every block boundary offset). */
#include <string.h>

#include "test.h"
#include "util/sha256.h"

static void check_hex(const char *data, const char *want) {
    char hex[65];
    em_sha256_hex(data, strlen(data), hex);
    CHECK_STR_EQ(hex, want);
    /* the same through init/update/final, one byte at a time */
    em_sha256 s;
    em_sha256_init(&s);
    for (size_t i = 0; data[i]; i++) em_sha256_update(&s, data + i, 1);
    uint8_t digest[32];
    em_sha256_final(&s, digest);
    em_sha256_to_hex(digest, hex);
    CHECK_STR_EQ(hex, want);
}

int main(void) {
    check_hex("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_hex("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

    char a[7];
    memset(a, 'a', sizeof a);
    em_sha256 s;
    em_sha256_init(&s);
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof a ? left : sizeof a;
        em_sha256_update(&s, a, n);
        left -= n;
    }
    uint8_t digest[32];
    em_sha256_final(&s, digest);
    char hex[65];
    em_sha256_to_hex(digest, hex);
    CHECK_STR_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    return test_finish();
}
