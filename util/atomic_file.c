/* Atomic replacement and whole-line appends (see atomic_file.h). */
#include "util/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes all of data to fd; 0, or -1 with errno set (ENOSPC for a short write that a retry could
 * not finish). */
static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

struct em_atomic_file {
    char *path, *tmp;
    int fd;
    int failed; /* errno of the first failed write, 0 while all went in */
};

static em_status cannot_write(const char *path, int saved) {
    return em_error_new(EM_EXIT_RUNTIME, "cannot write '%s': %s", path, strerror(saved));
}

em_status em_atomic_file_begin(const char *path, mode_t mode, em_atomic_file **out) {
    *out = NULL;
    const char *slash = strrchr(path, '/');
    char *tmp = slash ? em_xasprintf("%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
                      : em_xasprintf(".%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0 || fchmod(fd, mode) != 0) {
        em_status err = cannot_write(path, errno);
        if (fd >= 0) close(fd), unlink(tmp);
        free(tmp);
        return err;
    }
    em_atomic_file *f = em_xcalloc(1, sizeof *f);
    *f = (em_atomic_file){em_xstrdup(path), tmp, fd, 0};
    *out = f;
    return NULL;
}

em_status em_atomic_file_write(em_atomic_file *f, const void *data, size_t len) {
    if (!f->failed && write_all(f->fd, data, len) != 0) f->failed = errno;
    return f->failed ? cannot_write(f->path, f->failed) : NULL;
}

void em_atomic_file_abandon(em_atomic_file *f) {
    if (!f) return;
    close(f->fd);
    unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    free(f);
}

em_status em_atomic_file_commit(em_atomic_file *f) {
    int saved = f->failed;
    if (!saved && fsync(f->fd) != 0) saved = errno;
    if (close(f->fd) != 0 && !saved) saved = errno;
    f->fd = -1;
    if (!saved && rename(f->tmp, f->path) != 0) saved = errno;
    em_status err = saved ? cannot_write(f->path, saved) : NULL;
    if (saved) unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    free(f);
    return err;
}

em_status em_atomic_write(const char *path, const char *data, size_t len, mode_t mode) {
    em_atomic_file *f;
    em_status err = em_atomic_file_begin(path, mode, &f);
    if (!err) err = em_atomic_file_write(f, data, len);
    if (!err) return em_atomic_file_commit(f);
    em_atomic_file_abandon(f);
    return err;
}

em_status em_atomic_append_line(const char *path, const char *line) {
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return em_error_new(EM_EXIT_RUNTIME, "cannot append to '%s': %s", path, strerror(errno));
    struct stat before;
    char last = '\n';
    int rc = fstat(fd, &before);
    if (rc == 0 && before.st_size > 0 && pread(fd, &last, 1, before.st_size - 1) != 1) last = '\n';
    size_t n = strlen(line), start = last == '\n' ? 1 : 0;
    char *buf = em_xmalloc(n + 2);
    buf[0] = '\n';
    memcpy(buf + 1, line, n);
    buf[n + 1] = '\n';
    size_t total = n + 2 - start;
    ssize_t put = rc == 0 ? write(fd, buf + start, total) : -1;
    int saved = errno;
    if (put >= 0 && (size_t)put < total) {
        /* Short: find out why, then take back what got in, unless another writer appended since
         * (the reader then skips the torn line). */
        if (write_all(fd, buf + start + put, total - (size_t)put) == 0) put = (ssize_t)total;
        saved = errno;
        struct stat after;
        if (put != (ssize_t)total && fstat(fd, &after) == 0 &&
            after.st_size == before.st_size + put)
            (void)!ftruncate(fd, before.st_size);
    }
    free(buf);
    bool ok = put == (ssize_t)total;
    if (ok && fsync(fd) != 0 && errno != EINVAL) {
        ok = false;
        saved = errno;
    }
    if (close(fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (ok) return NULL;
    return em_error_new(EM_EXIT_RUNTIME, "cannot append to '%s': %s", path, strerror(saved));
}
