/* Whether evalmesh can run a well-formed GGUF file and, when it cannot, every reason why: an
 * architecture with no row in the architecture table, tensor types evalmesh does not compute
 * with, no tensors at all (a vocabulary-only file), a tokenizer it cannot build (an unknown
 * pre-tokenizer, with the closest known name), and otherwise what the strict loader said.
 * `evalmesh inspect` describes any GGUF with it; runs keep using the strict loader. */
#ifndef EVALMESH_GGUF_RUNNABLE_H
#define EVALMESH_GGUF_RUNNABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/formats/gguf.h"

typedef struct em_gguf_reasons {
    char **items; /* one line each, without the file name */
    size_t count;
} em_gguf_reasons;

/* Whether path is a regular file starting with the GGUF magic (false when it cannot be read). */
bool em_path_is_gguf(const char *path);
/* The reasons g cannot run; load_err is the strict loader's verdict on the same file (NULL: it
 * loaded, and there is no reason). */
em_gguf_reasons em_gguf_runnable_reasons(const em_gguf *g, em_status load_err);
void em_gguf_reasons_free(em_gguf_reasons *r);

#endif
