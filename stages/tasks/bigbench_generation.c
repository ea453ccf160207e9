/* BIG-bench's post-processing and exact_str_match of a generated text (bigbench_generation.h). */
#include "stages/tasks/bigbench_generation.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

em_status em_bigbench_output_regex(const char *pattern, const char *what, em_python_regex **out) {
    em_status err = em_python_regex_compile(pattern, what, out);
    if (err) return err;
    size_t groups = em_python_regex_groups(*out);
    if (groups > 1) {
        em_python_regex_free(*out);
        *out = NULL;
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: the pattern '%s' has %zu groups; BIG-bench takes at most one "
                            "(use (?:...) for the others)",
                            what, pattern, groups);
    }
    return NULL;
}

char *em_bigbench_postprocess(const char *text, size_t max_length, const char *stop_string,
                              const em_python_regex *output_regex) {
    size_t len = strlen(text);
    if (max_length) {
        /* text[:max_length]: the first max_length code points */
        size_t at = 0;
        for (size_t chars = 0; at < len && chars < max_length; chars++) {
            uint32_t cp;
            size_t n = em_utf8_decode_checked(text + at, len - at, &cp);
            at += n ? n : 1;
        }
        len = at;
    }
    char *s = em_xmalloc(len + 1);
    memcpy(s, text, len);
    s[len] = '\0';
    if (stop_string && *stop_string) {
        const char *found = strstr(s, stop_string);
        if (found && found > s) s[found - s + strlen(stop_string)] = '\0';
    }
    if (output_regex) {
        em_regex_span spans[2];
        em_regex_cursor cursor = {0};
        char *match;
        if (em_python_regex_next(output_regex, s, &cursor, spans)) {
            const em_regex_span *m = em_python_regex_groups(output_regex) ? &spans[1] : &spans[0];
            size_t n = m->start < 0 ? 0 : (size_t)(m->end - m->start);
            match = em_xmalloc(n + 1);
            memcpy(match, s + (m->start < 0 ? 0 : m->start), n);
            match[n] = '\0';
        } else {
            match = em_xstrdup("");
        }
        free(s);
        s = match;
    }
    return s;
}

double em_bigbench_exact_str_match(const char *response, const char *const *targets, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(response, targets[i]) == 0) return 1.0;
    return 0.0;
}
