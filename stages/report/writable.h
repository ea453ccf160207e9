/* Checking early that an output file can be written: its folder, or the nearest folder above it
 * that exists (missing ones are created when writing), must be a writable directory. */
#ifndef EVALMESH_REPORT_WRITABLE_H
#define EVALMESH_REPORT_WRITABLE_H

#include <stdbool.h>

/* True when path can be created or overwritten; otherwise *why (static text) says why. */
bool em_path_writable(const char *path, const char **why);

#endif
