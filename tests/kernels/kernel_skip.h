/* The kernel tests' one way to skip a CPU kernel this machine lacks: EVALMESH_CPU_KERNEL naming
 * it is refused with one message, which is checked, and the skip is printed. */
#ifndef EVALMESH_TEST_KERNEL_SKIP_H
#define EVALMESH_TEST_KERNEL_SKIP_H

#include <stdbool.h>
#include <stdio.h>

#include "util/error.h"
#include "test.h"

/* Whether err (from selecting the kernel `name`) says this CPU cannot run it: then its message is
 * checked, the skip printed and err freed. */
static inline bool test_kernel_missing(em_status err, const char *name) {
    if (!err) return false;
    char expected[160];
    snprintf(expected, sizeof expected,
             "EVALMESH_CPU_KERNEL=%s, but this CPU cannot run that kernel", name);
    CHECK_STR_EQ(err->message, expected);
    printf("kernel %s: not on this CPU, skipped\n", name);
    em_error_free(err);
    return true;
}

#endif
