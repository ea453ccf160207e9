/* Errors as values. A function that can fail returns an em_status: NULL means success, otherwise
 * a heap error carrying the process exit status it maps to and one message that names where the
 * problem is (file:line:col for recipes, rank and stage at run time). The caller either handles
 * the error, adds context with em_error_prefix, or returns it; it is printed once, by the CLI. */
#ifndef EVALMESH_ERROR_H
#define EVALMESH_ERROR_H

#include <stdarg.h>
#include <stddef.h>

/* Documented exit statuses of every evalmesh command (README "Exit statuses"). */
enum {
    EM_EXIT_OK = 0,
    EM_EXIT_FAILURE = 1,     /* internal error: a bug in evalmesh */
    EM_EXIT_BAD_INPUT = 2,   /* bad recipe, arguments or input file */
    EM_EXIT_GATE = 3,        /* a gate check failed (the reports were written) */
    EM_EXIT_RUNTIME = 4,     /* a stage failed while running on this rank */
    EM_EXIT_DISTRIBUTED = 5, /* another rank failed, died or did not answer in time */
    EM_EXIT_INTERRUPTED = 6, /* stopped by SIGTERM, SIGINT or the pre-timeout signal; resumable */
};

/* A place in a source file; line and col count from 1 (0 means unknown). */
typedef struct em_mark {
    const char *file; /* interned: lives as long as the process (see em_intern) */
    int line;
    int col;
} em_mark;

typedef struct em_error {
    int exit_code;
    char *message; /* the whole text shown, the place included */
    em_mark mark;  /* the place in an input file the error is about; file NULL when none */
} em_error;

/* NULL is success. */
typedef em_error *em_status;

/* A new error with a printf-style message. */
em_status em_error_new(int exit_code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
em_status em_error_newv(int exit_code, const char *fmt, va_list ap);
/* A new error at a place: its mark is set and its message starts with "file:line:col: ". */
em_status em_error_at(int exit_code, em_mark mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Puts "prefix: " before the message of err (returns err, for `return em_error_prefix(...)`). */
em_status em_error_prefix(em_status err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Puts "file:line:col: prefix: " before the message of err and sets its mark: an error found in
 * a file (a baseline, a URL) that a recipe option at `mark` names. */
em_status em_error_prefix_at(em_status err, em_mark mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void em_error_free(em_status err);

/* Formats a mark as "file:line:col" (or less when parts are unknown) into buf. */
const char *em_mark_format(em_mark mark, char *buf, int size);

/* A copy of s that is never freed: for file names kept by marks. Thread-safe. */
const char *em_intern(const char *s);

/* Allocation that never returns NULL: on exhaustion it prints and exits with EM_EXIT_FAILURE.
 * Use it for small bookkeeping; check large, size-driven allocations (tensors, files) yourself. */
void *em_xmalloc(size_t n);
void *em_xcalloc(size_t count, size_t size);
void *em_xrealloc(void *p, size_t n);
char *em_xstrdup(const char *s);
char *em_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
