/* Lookup in the table of embedded files (see embedded.h). */
#include "runner/recipe/embedded.h"

#include <string.h>

const char *em_embedded_find(const char *path) {
    for (const em_embedded_file *f = em_embedded_files; f->path; f++)
        if (strcmp(f->path, path) == 0) return f->text;
    return NULL;
}
