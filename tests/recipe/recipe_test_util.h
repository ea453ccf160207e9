/* Shared by the recipe tests: parsing a YAML snippet named "t.yaml" that must parse. */
#ifndef EVALMESH_RECIPE_TEST_UTIL_H
#define EVALMESH_RECIPE_TEST_UTIL_H

#include <string.h>

#include "runner/recipe/recipe.h"
#include "test.h"

/* The tree of text (a check fails, and the error is printed, when it does not parse). */
static inline em_node *parse(const char *text) {
    em_node *n = NULL;
    em_status err = em_yaml_parse(text, strlen(text), "t.yaml", &n);
    if (err) fprintf(stderr, "unexpected YAML error: %s\n", err->message);
    CHECK(err == NULL);
    em_error_free(err);
    return n;
}

#endif
