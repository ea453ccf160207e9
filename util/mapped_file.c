/* em_mapped_file_open: open without blocking, check the file type, map; em_mapped_file_read: the
 * same checks, then the bytes read into huge pages of their own (see mapped_file.h). */
#include "util/mapped_file.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/regular_file.h"

/* Maps the open file's file->size bytes (more than 0). */
static em_status map_bytes(int fd, const char *path, em_mapped_file *file) {
    void *m = mmap(NULL, file->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return em_error_new(EM_EXIT_BAD_INPUT, "cannot map '%s' (%zu bytes): %s", path, file->size,
                            strerror(errno));
    file->data = m;
    file->mapping = m;
    file->mapped_bytes = file->size;
    return NULL;
}

/* Anonymous read-write memory of `bytes` (a multiple of 2 MiB) starting on a 2 MiB boundary,
 * advised as huge pages; NULL when there is none. */
static uint8_t *huge_page_area(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    /* one huge page more than needed, so that a 2 MiB boundary starts the part kept */
    uint8_t *area =
        mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return NULL;
    uint8_t *at = (uint8_t *)(((uintptr_t)area + huge - 1) & ~(uintptr_t)(huge - 1));
    if (at > area) munmap(area, (size_t)(at - area));
    munmap(at + bytes, (size_t)(area + huge - at)); /* the tail: at < area + huge */
    madvise(at, bytes, MADV_HUGEPAGE);              /* advice: without THP the pages stay small */
    return at;
}

/* Reads the open file's file->size bytes (more than 0) into huge pages of their own: read, not
 * copied from a mapping, so the page cache's pages never count as this process's and its peak
 * is one copy. */
static em_status read_bytes(int fd, const char *path, em_mapped_file *file) {
    const size_t huge = (size_t)2 << 20;
    size_t bytes = (file->size + huge - 1) / huge * huge;
    uint8_t *at = huge_page_area(bytes);
    if (!at)
        return em_error_new(EM_EXIT_RUNTIME, "cannot read '%s' into memory (%zu bytes): %s", path,
                            bytes, strerror(errno));
    for (size_t done = 0; done < file->size;) {
        ssize_t n = pread(fd, at + done, file->size - done, (off_t)done);
        if (n > 0) {
            done += (size_t)n;
        } else if (n == 0 || errno != EINTR) {
            em_status err =
                em_error_new(EM_EXIT_BAD_INPUT, "cannot read '%s' (%zu of %zu bytes): %s", path,
                             done, file->size, n == 0 ? "it got shorter" : strerror(errno));
            munmap(at, bytes);
            return err;
        }
    }
    mprotect(at, bytes, PROT_READ);
    file->data = at;
    file->mapping = at;
    file->mapped_bytes = bytes;
    return NULL;
}

/* Opens path as `what` and brings its bytes in (an empty file: none); *out is untouched on
 * error. */
static em_status open_as(const char *path, const char *what,
                         em_status (*bring)(int, const char *, em_mapped_file *),
                         em_mapped_file *out) {
    int fd;
    struct stat st;
    em_status err = em_open_regular_file(path, what, &fd, &st);
    if (err) return err;
    em_mapped_file file = {.data = (const uint8_t *)"", .size = (size_t)st.st_size};
    if (file.size > 0) err = bring(fd, path, &file);
    close(fd);
    if (!err) *out = file;
    return err;
}

em_status em_mapped_file_open(const char *path, const char *what, em_mapped_file *out) {
    return open_as(path, what, map_bytes, out);
}

em_status em_mapped_file_read(const char *path, const char *what, em_mapped_file *out) {
    return open_as(path, what, read_bytes, out);
}

void em_mapped_file_close(em_mapped_file *file) {
    if (file->mapping) munmap(file->mapping, file->mapped_bytes);
    file->mapping = NULL;
}
