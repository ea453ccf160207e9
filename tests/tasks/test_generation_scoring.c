/* The scoring of generated text against its independent references (generation_scoring_expected
 * .json, written by make_generation_scoring.py): lm-eval 0.4.13's own filters and exact_match on
 * generated strings, BIG-bench 1.0.0's postprocess_output and exact_str_match on texts made from
 * real generative tasks' targets; then each refused regular expression with its message and
 * exit status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expected_json.h"
#include "stages/tasks/bigbench_generation.h"
#include "stages/tasks/exact_match.h"
#include "stages/tasks/output_filters.h"

static int failures;

static void check_string(const char *what, const char *input, const char *got,
                         const char *expected) {
    if (strcmp(got, expected) == 0) return;
    if (failures++ < 20)
        fprintf(stderr, "%s: input '%s': got '%s', expected '%s'\n", what, input, got, expected);
}

static const char *string_or_null(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static em_status must(em_status err) {
    if (err) {
        fprintf(stderr, "unexpected error: %s\n", err->message);
        exit(1);
    }
    return NULL;
}

static size_t check_filters(const cJSON *filters) {
    size_t cases = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, filters) {
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(f, "steps");
        em_filter_pipeline p = {.name = em_xstrdup("f")};
        p.step_count = (size_t)cJSON_GetArraySize(steps);
        p.steps = em_xcalloc(p.step_count, sizeof *p.steps);
        char *label = cJSON_PrintUnformatted(steps);
        size_t i = 0;
        const cJSON *s;
        cJSON_ArrayForEach(s, steps) {
            const char *function = string_or_null(s, "function");
            if (strcmp(function, "regex") == 0) {
                const cJSON *g = cJSON_GetObjectItemCaseSensitive(s, "group_select");
                must(em_filter_step_regex(string_or_null(s, "regex_pattern"),
                                          g ? (long)g->valuedouble : 0,
                                          string_or_null(s, "fallback"), label, &p.steps[i]));
            } else {
                p.steps[i].row = em_output_filter_find(function);
                if (!p.steps[i].row) {
                    fprintf(stderr, "no filter '%s'\n", function);
                    exit(1);
                }
            }
            i++;
        }
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(f, "cases")) {
            const char *text = cJSON_GetArrayItem(c, 0)->valuestring;
            char *answer;
            must(em_filter_pipeline_apply(&p, text, &answer));
            check_string(label, text, answer, cJSON_GetArrayItem(c, 1)->valuestring);
            free(answer);
            cases++;
        }
        free(label);
        em_filter_pipeline_clear(&p);
    }
    return cases;
}

static size_t check_exact_match(const cJSON *groups) {
    size_t cases = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, groups) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(g, "options");
        em_exact_match_options options = {
            .ignore_case = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ignore_case")),
            .ignore_punctuation =
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ignore_punctuation")),
            .ignore_numbers = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ignore_numbers")),
        };
        const cJSON *regexes = cJSON_GetObjectItemCaseSensitive(o, "regexes_to_ignore"), *r;
        options.regexes_to_ignore =
            em_xcalloc((size_t)cJSON_GetArraySize(regexes) + 1, sizeof(em_python_regex *));
        cJSON_ArrayForEach(r, regexes)
            must(em_python_regex_compile(r->valuestring, "regexes_to_ignore",
                                         &options.regexes_to_ignore[options.regex_count++]));
        char *label = cJSON_PrintUnformatted(o);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g, "cases")) {
            const char *p = cJSON_GetArrayItem(c, 0)->valuestring;
            const char *ref = cJSON_GetArrayItem(c, 1)->valuestring;
            double expected = cJSON_GetArrayItem(c, 2)->valuedouble;
            double got = em_exact_match(&options, p, ref);
            if (got != expected && failures++ < 20)
                fprintf(stderr, "exact_match %s: '%s' vs '%s': got %g, expected %g\n", label, p,
                        ref, got, expected);
            cases++;
        }
        free(label);
        em_exact_match_options_clear(&options);
    }
    return cases;
}

static size_t check_bigbench(const cJSON *tasks) {
    size_t cases = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tasks) {
        const char *name = string_or_null(t, "task");
        const char *pattern = string_or_null(t, "output_regex");
        em_python_regex *re = NULL;
        if (pattern && *pattern) must(em_bigbench_output_regex(pattern, name, &re));
        size_t max_length = (size_t)cJSON_GetObjectItemCaseSensitive(t, "max_length")->valuedouble;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(t, "cases")) {
            const char *text = cJSON_GetArrayItem(c, 0)->valuestring;
            char *processed =
                em_bigbench_postprocess(text, max_length, string_or_null(t, "stop_string"), re);
            check_string(name, text, processed, cJSON_GetArrayItem(c, 2)->valuestring);
            const cJSON *targets = cJSON_GetArrayItem(c, 1), *x;
            const char *list[64];
            size_t n = 0;
            cJSON_ArrayForEach(x, targets) if (n < 64) list[n++] = x->valuestring;
            double score = em_bigbench_exact_str_match(processed, list, n);
            if (score != cJSON_GetArrayItem(c, 3)->valuedouble && failures++ < 20)
                fprintf(stderr, "%s: exact_str_match of '%s': got %g\n", name, processed, score);
            free(processed);
            cases++;
        }
        em_python_regex_free(re);
    }
    return cases;
}

/* Each refused pattern: exit 2 and its message. */
static void check_refusals(void) {
    static const struct {
        const char *pattern, *message;
    } cases[] = {
        {"(\\d+)?? x", "t.yaml:3:5: the pattern '(\\d+)?? x' at character 7: lazy (*? +? ?? "
                       "{m,n}?) and possessive quantifiers are not supported (docs/tasks.md lists "
                       "the Python regular expressions evalmesh runs)"},
        {"a+?", "t.yaml:3:5: the pattern 'a+?' at character 3: lazy (*? +? ?? {m,n}?) and "
                "possessive quantifiers are not supported (docs/tasks.md lists the Python regular "
                "expressions evalmesh runs)"},
        {"(?P<n>\\d)", "t.yaml:3:5: the pattern '(?P<n>\\d)' at character 1: (?...) other than "
                       "(?:...) (look-around, named groups, flags) is not supported "
                       "(docs/tasks.md lists the Python regular expressions evalmesh runs)"},
        {"x(?=y)", "t.yaml:3:5: the pattern 'x(?=y)' at character 2: (?...) other than (?:...) "
                   "(look-around, named groups, flags) is not supported (docs/tasks.md lists the "
                   "Python regular expressions evalmesh runs)"},
        {"\\bword\\b", "t.yaml:3:5: the pattern '\\bword\\b' at character 1: the anchors \\b \\B "
                       "\\A \\Z are not supported (docs/tasks.md lists the Python regular "
                       "expressions evalmesh runs)"},
        {"(a)\\1", "t.yaml:3:5: the pattern '(a)\\1' at character 4: back-references are not "
                   "supported (docs/tasks.md lists the Python regular expressions evalmesh runs)"},
        {"[\\W]", "t.yaml:3:5: the pattern '[\\W]' at character 2: \\D, \\S and \\W inside a "
                  "bracket class are not supported (docs/tasks.md lists the Python regular "
                  "expressions evalmesh runs)"},
        {"[a-", "t.yaml:3:5: the pattern '[a-' at character 1: a '[' without its ']' "
                "(docs/tasks.md lists the Python regular expressions evalmesh runs)"},
        {"[z-a]", "t.yaml:3:5: the pattern '[z-a]' at character 2: a range out of order "
                  "(docs/tasks.md lists the Python regular expressions evalmesh runs)"},
        {"\\x41", "t.yaml:3:5: the pattern '\\x41' at character 1: this escape is not supported "
                  "(docs/tasks.md lists the Python regular expressions evalmesh runs)"},
        {"(ab", "t.yaml:3:5: the pattern '(ab' is invalid: Unmatched ( or \\("},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        em_python_regex *re = NULL;
        em_status err = em_python_regex_compile(cases[i].pattern, "t.yaml:3:5", &re);
        if (!err) {
            fprintf(stderr, "'%s' was accepted\n", cases[i].pattern);
            failures++;
            em_python_regex_free(re);
            continue;
        }
        if (err->exit_code != EM_EXIT_BAD_INPUT || strcmp(err->message, cases[i].message) != 0) {
            fprintf(stderr, "'%s': exit %d, message\n  %s\nexpected\n  %s\n", cases[i].pattern,
                    err->exit_code, err->message, cases[i].message);
            failures++;
        }
        em_error_free(err);
    }
    em_python_regex *re = NULL;
    em_status err = em_bigbench_output_regex("(a)(b)", "task.json", &re);
    const char *two = "task.json: the pattern '(a)(b)' has 2 groups; BIG-bench takes at most one "
                      "(use (?:...) for the others)";
    if (!err || err->exit_code != EM_EXIT_BAD_INPUT || strcmp(err->message, two) != 0) {
        fprintf(stderr, "two groups: %s\n", err ? err->message : "accepted");
        failures++;
    }
    em_error_free(err);
    /* lm-eval raises IndexError for a group_select beyond the matches: exit 4 */
    em_filter_pipeline p = {.name = em_xstrdup("strict"), .step_count = 1};
    p.steps = em_xcalloc(1, sizeof *p.steps);
    must(em_filter_step_regex("\\d", 2, NULL, "t.yaml:3:5", &p.steps[0]));
    char *answer = NULL;
    err = em_filter_pipeline_apply(&p, "1 2", &answer);
    const char *beyond = "filter 'strict', step 1 (regex): the regex filter's group_select 2 is "
                         "outside the 2 matches in the response (lm-eval raises IndexError there)";
    if (!err || err->exit_code != EM_EXIT_RUNTIME || strcmp(err->message, beyond) != 0) {
        fprintf(stderr, "group_select beyond: %s\n", err ? err->message : answer);
        failures++;
    }
    em_error_free(err);
    em_filter_pipeline_clear(&p);
}

int main(void) {
    cJSON *expected = expected_json("generation_scoring_expected.json");
    size_t f = check_filters(cJSON_GetObjectItemCaseSensitive(expected, "filters"));
    size_t e = check_exact_match(cJSON_GetObjectItemCaseSensitive(expected, "exact_match"));
    size_t b = check_bigbench(cJSON_GetObjectItemCaseSensitive(expected, "bigbench"));
    check_refusals();
    cJSON_Delete(expected);
    printf("filters: %zu cases, exact_match: %zu, BIG-bench postprocess + exact_str_match: %zu; "
           "%d failures\n",
           f, e, b, failures);
    return failures ? 1 : 0;
}
