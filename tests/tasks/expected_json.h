/* Reads the expected values the tasks tests compare with: a JSON file under tests/tasks written by
 * its reference script (mt19937_reference.py, bigbench_reference.py). */
#ifndef EVALMESH_TESTS_TASKS_EXPECTED_JSON_H
#define EVALMESH_TESTS_TASKS_EXPECTED_JSON_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "util/regular_file.h"

/* tests/tasks/NAME parsed; exits 1 with the reason when it cannot be read. */
static inline cJSON *expected_json(const char *name) {
    const char *source = getenv("EVALMESH_SOURCE_DIR");
    char *path = em_xasprintf("%s/tests/tasks/%s", source ? source : ".", name);
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
