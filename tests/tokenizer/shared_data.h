/* Helpers for the tokenizer tests: the shared data folder (skip when absent) and whole-file reads.
 */
#ifndef EVALMESH_TESTS_TOKENIZER_SHARED_DATA_H
#define EVALMESH_TESTS_TOKENIZER_SHARED_DATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

/* The path of rel inside EVALMESH_SHARED_DATA (malloc'd); skips the test when it is absent. */
static inline char *shared_path(const char *rel) {
    const char *dir = getenv("EVALMESH_SHARED_DATA");
    if (!dir) dir = "../shared/data";
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, rel);
    if (access(path, R_OK) != 0) TEST_SKIP("%s is absent (shared test data)", path);
    return path;
}

/* The whole file (malloc'd, NUL-terminated), or NULL. */
static inline char *read_whole(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    *len = fread(buf, 1, (size_t)size, f);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

#endif
