/* Whole-file reads of regular files with a size limit (see regular_file.h). */
#include "util/regular_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *em_file_kind(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "another kind of file";
}

static em_status not_regular(const char *path, mode_t mode, const char *what) {
    return em_error_new(EM_EXIT_BAD_INPUT,
                        "cannot read '%s': it is %s, not a regular file (%s must be one)", path,
                        em_file_kind(mode), what);
}

em_status em_open_regular_file(const char *path, const char *what, int *fd, struct stat *st) {
    /* O_NONBLOCK: opening a FIFO with no writer must not wait; fstat then refuses it. */
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (*fd < 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "cannot read '%s': %s", path, strerror(errno));
    em_status err = NULL;
    if (fstat(*fd, st) != 0)
        err = em_error_new(EM_EXIT_BAD_INPUT, "cannot read '%s': %s", path, strerror(errno));
    else if (!S_ISREG(st->st_mode))
        err = not_regular(path, st->st_mode, what);
    if (err) {
        close(*fd);
        *fd = -1;
    }
    return err;
}

em_status em_check_private_file(const char *path, const char *what) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "cannot read '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode, what);
    if (st.st_uid != geteuid())
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "refusing '%s': it belongs to uid %ld, not to this user (uid %ld); %s "
                            "must be the user's own",
                            path, (long)st.st_uid, (long)geteuid(), what);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "refusing '%s': others may write it (mode %04o); %s must be writable "
                            "by its owner only",
                            path, (unsigned)(st.st_mode & 07777), what);
    return NULL;
}

em_status em_read_regular_file(const char *path, size_t limit, const char *what, char **out,
                               size_t *len) {
    *out = NULL;
    int fd;
    struct stat st;
    em_status err = em_open_regular_file(path, what, &fd, &st);
    if (err) return err;
    if ((size_t)st.st_size > limit) {
        close(fd);
        return em_error_new(
            EM_EXIT_BAD_INPUT,
            "cannot read '%s': it is %lld bytes, more than the limit of %zu bytes for %s", path,
            (long long)st.st_size, limit, what);
    }
    /* Read up to one byte past the limit, so a file that grows while it is read is caught. */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return em_error_new(EM_EXIT_RUNTIME, "%s: out of memory reading %zu bytes", path, cap);
    }
    for (;;) {
        if (n == cap) {
            if (cap > limit) break;
            cap = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
            buf = em_xrealloc(buf, cap + 1);
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            err = em_error_new(EM_EXIT_BAD_INPUT, "cannot read '%s': %s", path, strerror(errno));
            free(buf);
            close(fd);
            return err;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n > limit) {
        free(buf);
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "cannot read '%s': it grew past the limit of %zu bytes for %s", path,
                            limit, what);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return NULL;
}
