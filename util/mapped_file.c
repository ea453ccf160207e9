/* em_mapped_file_open: open without blocking, check the file type, map (see mapped_file.h). */
#include "util/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/regular_file.h"

em_status em_mapped_file_open(const char *path, em_mapped_file *out) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; it changes
     * nothing for a regular file, which is all that gets past the check below. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        em_status err =
            em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return err;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: not a regular file (%s)", path,
                            em_file_kind(st.st_mode));
    }
    em_mapped_file file = {.data = (const uint8_t *)"", .size = (size_t)st.st_size};
    if (file.size > 0) {
        void *m = mmap(NULL, file.size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            em_status err = em_error_new(EM_EXIT_BAD_INPUT, "%s: cannot map %zu bytes: %s", path,
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
