/* The kernel tests' one way to skip a CPU kernel this machine lacks (EVALMESH_CPU_KERNEL naming
 * it is refused with one message, which is checked, and the skip is printed) and to check the
 * refusal of a name that is no kernel. */
#ifndef EVALMESH_TEST_KERNEL_SKIP_H
#define EVALMESH_TEST_KERNEL_SKIP_H

#include <stdbool.h>
#include <stdio.h>

#include "util/error.h"
#include "stages/kernels/cpu/gemm_microkernel.h"
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

/* Checks err (from selecting with EVALMESH_CPU_KERNEL=sse9) is the refusal of a name that is no
 * CPU kernel: exit status 2 and the kernels there are. */
static inline void test_kernel_unknown_refused(em_status err) {
    CHECK(err != NULL);
    if (!err) return;
    CHECK_STR_EQ(err->message,
                 "EVALMESH_CPU_KERNEL=sse9 is not a CPU kernel (" EM_CPU_KERNEL_NAMES ")");
    CHECK_INT_EQ(err->exit_code, 2);
    em_error_free(err);
}

#endif
