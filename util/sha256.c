/* SHA-256 through libcrypto's EVP interface (see sha256.h). libcrypto fails here only when it
 * cannot allocate, which ends the process like every other allocation failure (error.h). */
#include "util/sha256.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"

static void check(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "evalmesh: libcrypto: %s failed (out of memory?)\n", what);
    exit(EM_EXIT_FAILURE);
}

void em_sha256_init(em_sha256 *s) {
    s->ctx = EVP_MD_CTX_new();
    check(s->ctx != NULL, "EVP_MD_CTX_new");
    check(EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL), "EVP_DigestInit_ex(sha256)");
}

void em_sha256_update(em_sha256 *s, const void *data, size_t len) {
    check(EVP_DigestUpdate(s->ctx, data, len), "EVP_DigestUpdate");
}

void em_sha256_final(em_sha256 *s, uint8_t digest[32]) {
    check(EVP_DigestFinal_ex(s->ctx, digest, NULL), "EVP_DigestFinal_ex");
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
}

void em_sha256_to_hex(const uint8_t digest[32], char hex[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = 0;
}

void em_sha256_hex(const void *data, size_t len, char hex[65]) {
    uint8_t digest[32];
    check(EVP_Digest(data, len, digest, NULL, EVP_sha256(), NULL), "EVP_Digest(sha256)");
    em_sha256_to_hex(digest, hex);
}
