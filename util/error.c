/* Error values (see error.h) and the allocation helpers every file uses. */
#include "util/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void out_of_memory(size_t n) {
    fprintf(stderr, "evalmesh: out of memory allocating %zu bytes\n", n);
    exit(EM_EXIT_FAILURE);
}

void *em_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *em_xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(count * size);
    return p;
}

void *em_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

char *em_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = em_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

static char *vformat(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) n = 0;
    char *s = em_xmalloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *em_xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

em_status em_error_newv(int exit_code, const char *fmt, va_list ap) {
    em_error *e = em_xcalloc(1, sizeof *e);
    e->exit_code = exit_code;
    e->message = vformat(fmt, ap);
    return e;
}

em_status em_error_new(int exit_code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_status e = em_error_newv(exit_code, fmt, ap);
    va_end(ap);
    return e;
}

const char *em_mark_format(em_mark mark, char *buf, int size) {
    const char *file = mark.file ? mark.file : "<input>";
    if (mark.line > 0 && mark.col > 0)
        snprintf(buf, (size_t)size, "%s:%d:%d", file, mark.line, mark.col);
    else if (mark.line > 0)
        snprintf(buf, (size_t)size, "%s:%d", file, mark.line);
    else
        snprintf(buf, (size_t)size, "%s", file);
    return buf;
}

/* Puts "text: " before the message of err (takes text). */
static em_status prepend(em_status err, char *text) {
    char *joined = em_xasprintf("%s: %s", text, err->message);
    free(text);
    free(err->message);
    err->message = joined;
    return err;
}

/* Puts "file:line:col: " before the message of err and sets its mark. */
static em_status locate(em_status err, em_mark mark) {
    char where[1024];
    em_mark_format(mark, where, sizeof where);
    err->mark = mark;
    return prepend(err, em_xstrdup(where));
}

em_status em_error_at(int exit_code, em_mark mark, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_status e = em_error_newv(exit_code, fmt, ap);
    va_end(ap);
    return locate(e, mark);
}

em_status em_error_prefix(em_status err, const char *fmt, ...) {
    if (!err) return err;
    va_list ap;
    va_start(ap, fmt);
    char *prefix = vformat(fmt, ap);
    va_end(ap);
    return prepend(err, prefix);
}

em_status em_error_prefix_at(em_status err, em_mark mark, const char *fmt, ...) {
    if (!err) return err;
    va_list ap;
    va_start(ap, fmt);
    char *prefix = vformat(fmt, ap);
    va_end(ap);
    return locate(prepend(err, prefix), mark);
}

void em_error_free(em_status err) {
    if (!err) return;
    free(err->message);
    free(err);
}

/* Interned strings: a small linked list, searched linearly (there are few file names). */
typedef struct interned {
    struct interned *next;
    char text[];
} interned;

static interned *interned_head;
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

const char *em_intern(const char *s) {
    if (!s) return NULL;
    pthread_mutex_lock(&intern_lock);
    for (interned *it = interned_head; it; it = it->next) {
        if (strcmp(it->text, s) == 0) {
            pthread_mutex_unlock(&intern_lock);
            return it->text;
        }
    }
    size_t n = strlen(s) + 1;
    interned *it = em_xmalloc(sizeof *it + n);
    memcpy(it->text, s, n);
    it->next = interned_head;
    interned_head = it;
    pthread_mutex_unlock(&intern_lock);
    return it->text;
}
