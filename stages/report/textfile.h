/* Path helpers for reports: create folders, place paths relative to the recipe or the run
 * directory. Files are read with util/regular_file.h and written with util/atomic_file.h. */
#ifndef EVALMESH_REPORT_TEXTFILE_H
#define EVALMESH_REPORT_TEXTFILE_H

#include "util/error.h"

/* Creates a folder and its parents (mode 0755) when missing. */
em_status em_textfile_mkdirs(const char *path);
/* "dir/name", or name itself when it is absolute or dir is NULL (heap string). */
char *em_textfile_join(const char *dir, const char *name);

#endif
