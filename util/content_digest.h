/* Content digests: XXH3-128 (xxHash, Debian's libxxhash) of bytes, written as 32 lowercase hex
 * digits (the canonical big-endian form `xxhsum -H2` prints). They identify a model by every byte
 * it was loaded from, tensor data included, and calibration statistics by their numbers: resume,
 * the gate's records, history and compare tell inputs apart by them. Not a cryptographic hash: it
 * detects changes, not forgeries (header and dataset checksums stay SHA-256, sha256.h). It runs
 * at memory speed (the README gives the time per GB). */
#ifndef EVALMESH_CONTENT_DIGEST_H
#define EVALMESH_CONTENT_DIGEST_H

#include <stddef.h>

#include "util/error.h"

enum { EM_DIGEST_HEX = 33 }; /* 32 hex digits and a NUL */

struct XXH3_state_s; /* xxHash's streaming state */

/* A digest being computed: em_content_digest_init, any number of updates, then
 * em_content_digest_final, which also releases it. */
typedef struct em_content_digest {
    struct XXH3_state_s *state;
} em_content_digest;

void em_content_digest_init(em_content_digest *d);
void em_content_digest_update(em_content_digest *d, const void *data, size_t len);
/* Adds the bytes of the regular file at path (mapped, not copied); `what` names it for errors
 * ("a model config"), exit status 2 as mapped_file.h's. */
em_status em_content_digest_update_file(em_content_digest *d, const char *path, const char *what);
void em_content_digest_final(em_content_digest *d, char hex[EM_DIGEST_HEX]);
/* The digest of data in one call. */
void em_content_digest_hex(const void *data, size_t len, char hex[EM_DIGEST_HEX]);

#endif
