/* Reads tests/tasks/bigbench_expected.json (written by bigbench_reference.py) for the BIG-bench
 * tests. */
#ifndef EVALMESH_TESTS_BIGBENCH_EXPECTED_H
#define EVALMESH_TESTS_BIGBENCH_EXPECTED_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "util/regular_file.h"

/* The parsed file; exits 1 with the reason when it cannot be read. */
static inline cJSON *bigbench_expected(void) {
    const char *source = getenv("EVALMESH_SOURCE_DIR");
    char *path = em_xasprintf("%s/tests/tasks/bigbench_expected.json", source ? source : ".");
    char *text;
    em_status err =
        em_read_regular_file(path, EM_TEXT_MAX_BYTES, "the expected values", &text, NULL);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        exit(1);
    }
    cJSON *expected = cJSON_Parse(text);
    if (!expected) {
        fprintf(stderr, "%s: invalid JSON\n", path);
        exit(1);
    }
    free(text);
    free(path);
    return expected;
}

#endif
