/* XXH3-128 content digests through libxxhash's streaming API (see content_digest.h). libxxhash
 * fails only when it cannot allocate its state, which ends the process like every other
 * allocation failure (error.h). */
#include "util/content_digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

#include "util/mapped_file.h"

void em_content_digest_init(em_content_digest *d) {
    d->state = XXH3_createState();
    if (!d->state || XXH3_128bits_reset(d->state) != XXH_OK) {
        fprintf(stderr, "evalmesh: libxxhash: XXH3_createState failed (out of memory?)\n");
        exit(EM_EXIT_FAILURE);
    }
}

void em_content_digest_update(em_content_digest *d, const void *data, size_t len) {
    if (len) XXH3_128bits_update(d->state, data, len);
}

em_status em_content_digest_update_file(em_content_digest *d, const char *path, const char *what) {
    em_mapped_file file;
    em_status err = em_mapped_file_open(path, what, &file);
    if (err) return err;
    em_content_digest_update(d, file.data, file.size);
    em_mapped_file_close(&file);
    return NULL;
}

static void to_hex(XXH128_hash_t hash, char hex[EM_DIGEST_HEX]) {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, hash);
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", canonical.digest[i]);
}

void em_content_digest_final(em_content_digest *d, char hex[EM_DIGEST_HEX]) {
    to_hex(XXH3_128bits_digest(d->state), hex);
    XXH3_freeState(d->state);
    d->state = NULL;
}

void em_content_digest_hex(const void *data, size_t len, char hex[EM_DIGEST_HEX]) {
    to_hex(XXH3_128bits(data, len), hex);
}
