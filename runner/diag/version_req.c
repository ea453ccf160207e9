/* Dotted version comparison and requirement checks (see version_req.h). */
#include "runner/diag/version_req.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int em_version_compare(const char *a, const char *b) {
    while (*a || *b) {
        long x = 0, y = 0;
        while (*a && !isdigit((unsigned char)*a)) a++;
        while (*b && !isdigit((unsigned char)*b)) b++;
        if (*a) x = strtol(a, (char **)&a, 10);
        if (*b) y = strtol(b, (char **)&b, 10);
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

em_status em_version_satisfies(const char *version, const char *requirement, bool *ok) {
    const char *r = requirement;
    while (*r == ' ') r++;
    const char *ops[] = {">=", "<=", "==", ">", "<", "="};
    const char *op = ">=";
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        size_t n = strlen(ops[i]);
        if (strncmp(r, ops[i], n) == 0) {
            op = ops[i];
            r += n;
            break;
        }
    }
    while (*r == ' ') r++;
    if (!isdigit((unsigned char)*r))
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "version requirement '%s' is not OPERATOR VERSION (e.g. \">=2.14\")",
                            requirement);
    for (const char *p = r; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.')
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "version requirement '%s': '%s' is not a dotted version",
                                requirement, r);
    int c = em_version_compare(version, r);
    if (strcmp(op, ">=") == 0)
        *ok = c >= 0;
    else if (strcmp(op, "<=") == 0)
        *ok = c <= 0;
    else if (strcmp(op, ">") == 0)
        *ok = c > 0;
    else if (strcmp(op, "<") == 0)
        *ok = c < 0;
    else
        *ok = c == 0;
    return NULL;
}
