/* Whether a string ends with a given suffix: file extensions, metric-name endings. */
#ifndef EVALMESH_SUFFIX_H
#define EVALMESH_SUFFIX_H

#include <stdbool.h>

/* Whether s ends with suffix (every string ends with ""). */
bool em_ends_with(const char *s, const char *suffix);

#endif
