/* em_mapped_file_open: open without blocking, check the file type, map (see mapped_file.h). */
#include "util/mapped_file.h"

#include <errno.h>
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
    }
    close(fd);
    *out = file;
    return NULL;
}

void em_mapped_file_close(em_mapped_file *file) {
    if (file->mapping) munmap(file->mapping, file->size);
    file->mapping = NULL;
}
