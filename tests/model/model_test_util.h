/* Helpers shared by the model tests: a scratch directory, running evalmesh-mkmodel, reading and
 * writing whole files, and the message of a bad-input error. */
#ifndef EVALMESH_MODEL_TEST_UTIL_H
#define EVALMESH_MODEL_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "test.h"

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

/* The message of a parser's error (err is freed), after checking its exit status is 2 (bad
 * input); "" when err is NULL (the parse succeeded), which the callers treat as a failure. The
 * caller frees the message. */
static inline char *bad_input_message(em_status err) {
    if (!err) return em_xstrdup("");
    CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
    char *msg = em_xstrdup(err->message);
    em_error_free(err);
    return msg;
}

#endif
