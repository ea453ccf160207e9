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

em_status em_atomic_write(const char *path, const char *data, size_t len, mode_t mode) {
    const char *slash = strrchr(path, '/');
    char *tmp = slash ? em_xasprintf("%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
                      : em_xasprintf(".%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        em_status err =
            em_error_new(EM_EXIT_RUNTIME, "cannot write '%s': %s", path, strerror(errno));
        free(tmp);
        return err;
    }
    bool ok = fchmod(fd, mode) == 0 && write_all(fd, data, len) == 0 && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        saved = errno;
    }
    if (!ok) unlink(tmp);
    free(tmp);
    if (ok) return NULL;
    return em_error_new(EM_EXIT_RUNTIME, "cannot write '%s': %s", path, strerror(saved));
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
