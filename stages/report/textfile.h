/* Small file helpers for reports: read a whole file, write one atomically (a temporary file in the
 * same folder, then rename, so a reader never sees half a results.json), create folders. */
#ifndef EVALMESH_REPORT_TEXTFILE_H
#define EVALMESH_REPORT_TEXTFILE_H

#include <stddef.h>

#include "util/error.h"

/* Reads path into a NUL-terminated heap buffer (*len without the NUL). Errors (exit 2) name the
 * file and the reason. */
em_status em_textfile_read(const char *path, char **out, size_t *len);
/* Writes len bytes to path through path.tmp + rename. Errors (exit 4) name the file. */
em_status em_textfile_write(const char *path, const char *data, size_t len);
/* Appends one line (a '\n' is added) with a single write, so concurrent appenders do not mix. */
em_status em_textfile_append_line(const char *path, const char *line);
/* Creates a folder and its parents (mode 0755) when missing. */
em_status em_textfile_mkdirs(const char *path);
/* "dir/name", or name itself when it is absolute or dir is NULL (heap string). */
char *em_textfile_join(const char *dir, const char *name);

#endif
