/* File helpers for reports (see textfile.h). */
#include "stages/report/textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

em_status em_textfile_read(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = em_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = em_xrealloc(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return NULL;
}

em_status em_textfile_write(const char *path, const char *data, size_t len) {
    char *tmp = em_xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        em_status err =
            em_error_new(EM_EXIT_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
        free(tmp);
        return err;
    }
    size_t put = fwrite(data, 1, len, f);
    int failed = put != len || fflush(f) != 0;
    failed |= fclose(f) != 0;
    if (failed || rename(tmp, path) != 0) {
        em_status err =
            em_error_new(EM_EXIT_RUNTIME, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return err;
    }
    free(tmp);
    return NULL;
}

em_status em_textfile_append_line(const char *path, const char *line) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return em_error_new(EM_EXIT_RUNTIME, "%s: cannot append: %s", path, strerror(errno));
    size_t n = strlen(line);
    char *buf = em_xmalloc(n + 1);
    memcpy(buf, line, n);
    buf[n] = '\n';
    ssize_t put = write(fd, buf, n + 1);
    free(buf);
    int err_no = errno;
    if (close(fd) != 0 && put == (ssize_t)(n + 1)) {
        put = -1;
        err_no = errno;
    }
    if (put != (ssize_t)(n + 1))
        return em_error_new(EM_EXIT_RUNTIME, "%s: cannot append: %s", path,
                            put < 0 ? strerror(err_no) : "short write");
    return NULL;
}

em_status em_textfile_mkdirs(const char *path) {
    char *p = em_xstrdup(path);
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c != '/' && c != 0) continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            em_status err =
                em_error_new(EM_EXIT_RUNTIME, "%s: cannot create folder: %s", p, strerror(errno));
            free(p);
            return err;
        }
        *s = c;
        if (c == 0) break;
    }
    free(p);
    return NULL;
}

char *em_textfile_join(const char *dir, const char *name) {
    if (!dir || name[0] == '/') return em_xstrdup(name);
    return em_xasprintf("%s/%s", dir, name);
}
