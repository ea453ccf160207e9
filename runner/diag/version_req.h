/* Version requirements such as ">=2.14", "<5", "==4.2.2" against dotted versions ("2.18.3"),
 * used by `require:` in the env_check stage. */
#ifndef EVALMESH_VERSION_REQ_H
#define EVALMESH_VERSION_REQ_H

#include <stdbool.h>

#include "util/error.h"

/* Compares dotted versions numerically part by part (missing parts are 0): <0, 0, >0. */
int em_version_compare(const char *a, const char *b);
/* Whether version satisfies requirement (operators >=, >, <=, <, ==, = or none meaning >=).
 * A malformed requirement is an error (exit 2). */
em_status em_version_satisfies(const char *version, const char *requirement, bool *ok);

#endif
