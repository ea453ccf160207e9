/* SHA-256 (FIPS 180-4), for checksums of model headers, data files and results. */
#ifndef EVALMESH_SHA256_H
#define EVALMESH_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct em_sha256 {
    uint32_t state[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[64];
    size_t fill; /* bytes waiting in block */
} em_sha256;

void em_sha256_init(em_sha256 *s);
void em_sha256_update(em_sha256 *s, const void *data, size_t len);
void em_sha256_final(em_sha256 *s, uint8_t digest[32]);
/* The digest of data as 64 lowercase hex digits plus a NUL. */
void em_sha256_hex(const void *data, size_t len, char hex[65]);
/* Formats a finished digest as hex. */
void em_sha256_to_hex(const uint8_t digest[32], char hex[65]);

#endif
