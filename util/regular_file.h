/* Reading a whole input file safely: the path must name a regular file (a FIFO, a device such as
 * /dev/zero, a socket or a directory is refused before any read, so nothing blocks or reads
 * forever) no larger than a stated limit. Used for every input read whole into memory: recipes
 * and their includes, dataset text, history and spool files. */
#ifndef EVALMESH_REGULAR_FILE_H
#define EVALMESH_REGULAR_FILE_H

#include <stddef.h>
#include <sys/stat.h>

#include "util/error.h"

/* Limits of the files read whole (README "Limits"). */
#define EM_RECIPE_MAX_BYTES ((size_t)1 << 20) /* a recipe or one included file: 1 MiB */
#define EM_TEXT_MAX_BYTES ((size_t)1 << 30)   /* a dataset or other text input: 1 GiB */

/* "a FIFO", "a character device", "a directory", ...: what a non-regular mode is, for messages. */
const char *em_file_kind(mode_t mode);

/* Opens path for reading (without waiting on a FIFO) and checks with fstat that it is a regular
 * file: *fd and *st on success, else an error worded as em_read_regular_file's (exit 2). For
 * readers that do not read the whole file into memory, such as the mapped model files. */
em_status em_open_regular_file(const char *path, const char *what, int *fd, struct stat *st);

/* Checks that a file whose contents decide where data goes (a push spool file, a run's resolved
 * recipe) can be trusted: a regular file, not a symbolic link, owned by the effective user and
 * writable by nobody else. Errors are exit 2 and say which condition failed. */
em_status em_check_private_file(const char *path, const char *what);

/* Reads path into a NUL-terminated heap buffer (*len, when not NULL, excludes the NUL). Errors
 * are exit 2: "cannot read 'PATH': REASON", "cannot read 'PATH': it is a FIFO, not a regular
 * file (WHAT must be one)", "cannot read 'PATH': it is N bytes, more than the limit of LIMIT bytes
 * for WHAT" (what: "a recipe", "a dataset", ...). */
em_status em_read_regular_file(const char *path, size_t limit, const char *what, char **out,
                               size_t *len);

#endif
