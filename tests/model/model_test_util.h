/* Helpers shared by the model tests: a scratch directory, running evalmesh-mkmodel, and reading
 * and writing whole files. */
#ifndef EVALMESH_MODEL_TEST_UTIL_H
#define EVALMESH_MODEL_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/util/error.h"

/* A fresh directory under /tmp, removed by scratch_remove. */
static inline char *scratch_dir(void) {
    char *dir = em_xstrdup("/tmp/em-model-test-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    return dir;
}

static inline void scratch_remove(char *dir) {
    char *cmd = em_xasprintf("rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    free(cmd);
    free(dir);
}

/* Runs `MKMODEL ARGS` (printf-style); returns its exit status. */
static inline int run_mkmodel(const char *mkmodel, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char args[1024];
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *cmd = em_xasprintf("'%s' %s", mkmodel, args);
    int rc = system(cmd);
    free(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static inline uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = em_xmalloc((size_t)n);
    if (fread(data, 1, (size_t)n, f) != (size_t)n) exit(1);
    fclose(f);
    *size = (size_t)n;
    return data;
}

static inline void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

#endif
