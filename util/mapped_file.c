/* em_mapped_file_open: open without blocking, check the file type, map; and moving the bytes into
 * huge pages of their own (see mapped_file.h). */
#include "util/mapped_file.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/regular_file.h"

em_status em_mapped_file_open(const char *path, const char *what, em_mapped_file *out) {
    int fd;
    struct stat st;
    em_status err = em_open_regular_file(path, what, &fd, &st);
    if (err) return err;
    em_mapped_file file = {.data = (const uint8_t *)"", .size = (size_t)st.st_size};
    if (file.size > 0) {
        void *m = mmap(NULL, file.size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            err = em_error_new(EM_EXIT_BAD_INPUT, "cannot map '%s' (%zu bytes): %s", path,
                               file.size, strerror(errno));
            close(fd);
            return err;
        }
        file.data = m;
        file.mapping = m;
        file.mapped_bytes = file.size;
    }
    close(fd);
    *out = file;
    return NULL;
}

em_status em_mapped_file_into_memory(em_mapped_file *file, const char *path) {
    if (!file->mapping) return NULL; /* an empty file: nothing to move */
    const size_t huge = (size_t)2 << 20;
    size_t bytes = (file->size + huge - 1) / huge * huge;
    /* one huge page more than needed, so that a 2 MiB boundary starts the part kept */
    uint8_t *area =
        mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED)
        return em_error_new(EM_EXIT_RUNTIME, "%s: cannot read the file into memory (%zu bytes): %s",
                            path, bytes, strerror(errno));
    uint8_t *at = (uint8_t *)(((uintptr_t)area + huge - 1) & ~(uintptr_t)(huge - 1));
    if (at > area) munmap(area, (size_t)(at - area));
    munmap(at + bytes, (size_t)(area + huge - at)); /* the tail: at < area + huge */
    madvise(at, bytes, MADV_HUGEPAGE);              /* advice: without THP the pages stay small */
    memcpy(at, file->data, file->size);
    mprotect(at, bytes, PROT_READ);
    munmap(file->mapping, file->mapped_bytes);
    file->data = at;
    file->mapping = at;
    file->mapped_bytes = bytes;
    return NULL;
}

void em_mapped_file_close(em_mapped_file *file) {
    if (file->mapping) munmap(file->mapping, file->mapped_bytes);
    file->mapping = NULL;
}
