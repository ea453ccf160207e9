/* SHA-256, for checksums of model headers, data files and results: OpenSSL's libcrypto (EVP)
 * behind a small API, so callers need no OpenSSL headers. */
#ifndef EVALMESH_SHA256_H
#define EVALMESH_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct evp_md_ctx_st; /* OpenSSL's EVP_MD_CTX */

/* A digest being computed: em_sha256_init, any number of em_sha256_update, then
 * em_sha256_final, which also releases it. */
typedef struct em_sha256 {
    struct evp_md_ctx_st *ctx;
} em_sha256;

void em_sha256_init(em_sha256 *s);
void em_sha256_update(em_sha256 *s, const void *data, size_t len);
void em_sha256_final(em_sha256 *s, uint8_t digest[32]);
/* The digest of data as 64 lowercase hex digits plus a NUL. */
void em_sha256_hex(const void *data, size_t len, char hex[65]);
/* Formats a finished digest as hex. */
void em_sha256_to_hex(const uint8_t digest[32], char hex[65]);

#endif
