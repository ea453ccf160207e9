/* Writes that cannot half-happen. Every file a run writes (rank state, results, reports, the
 * resolved recipe, push spool) goes through em_atomic_write: the bytes go to a temporary file in
 * the same folder, every write, the fsync and the close are checked, and only then is it renamed
 * over the target, so a reader (or the next run, after a full disk or a crash) sees the old file
 * or the whole new one, never a truncated one. History files grow by em_atomic_append_line: one
 * write() of one whole line on an O_APPEND descriptor, cut back when the write came up short. */
#ifndef EVALMESH_ATOMIC_FILE_H
#define EVALMESH_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

/* Replaces path with len bytes of data; the new file gets permissions mode. The temporary file is
 * "<folder>/.<name>.XXXXXX" and is removed on failure, leaving path as it was. Errors (exit 4)
 * name path and the reason ("No space left on device", ...). */
em_status em_atomic_write(const char *path, const char *data, size_t len, mode_t mode);

/* The same replacement written in pieces, for a file too big to hold (the token file): begin,
 * any number of writes, then commit (fsync, close, rename) or abandon (removes the temporary
 * file). Errors as em_atomic_write's; after a failed write, commit abandons and returns it. */
typedef struct em_atomic_file em_atomic_file;
em_status em_atomic_file_begin(const char *path, mode_t mode, em_atomic_file **out);
em_status em_atomic_file_write(em_atomic_file *f, const void *data, size_t len);
em_status em_atomic_file_commit(em_atomic_file *f);
void em_atomic_file_abandon(em_atomic_file *f);

/* Appends line and a '\n' with a single write (concurrent appenders do not interleave). When the
 * file does not end with '\n' (an append that was cut short by an older writer), a '\n' goes
 * first, so the new line is never glued to a torn one. When the write comes up short (disk full)
 * the file is cut back to its previous length. Creates the file (0644) when missing. Errors are
 * exit 4 and name path. */
em_status em_atomic_append_line(const char *path, const char *line);

#endif
