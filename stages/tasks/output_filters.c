/* lm-evaluation-harness's filters of generated text, one row per filter (output_filters.h). */
#include "stages/tasks/output_filters.h"

#include <stdlib.h>
#include <string.h>

#include "stages/tasks/python_str.h"

static void replace(char **text, char *with) {
    free(*text);
    *text = with;
}

static char *slice(const char *text, const em_regex_span *span) {
    if (span->start < 0) return em_xstrdup("");
    size_t n = (size_t)(span->end - span->start);
    char *s = em_xmalloc(n + 1);
    memcpy(s, text + span->start, n);
    s[n] = '\0';
    return s;
}

/* RegexFilter.apply for one response. */
static em_status apply_regex(const em_filter_step *step, char **text) {
    size_t groups = em_python_regex_groups(step->regex);
    em_regex_span *spans = NULL;
    size_t count = 0;
    em_regex_cursor cursor = {0};
    for (;;) {
        spans = em_xrealloc(spans, (count + 1) * (groups + 1) * sizeof *spans);
        if (!em_python_regex_next(step->regex, *text, &cursor, spans + count * (groups + 1))) break;
        count++;
    }
    em_status err = NULL;
    if (count == 0) {
        replace(text, em_xstrdup(step->fallback));
    } else {
        long index = step->group_select < 0 ? (long)count + step->group_select : step->group_select;
        if (index < 0 || index >= (long)count) {
            err = em_error_new(EM_EXIT_RUNTIME,
                               "the regex filter's group_select %ld is outside the %zu matches in "
                               "the response (lm-eval raises IndexError there)",
                               step->group_select, count);
        } else {
            const em_regex_span *m = spans + (size_t)index * (groups + 1);
            char *match = NULL;
            if (groups == 0) {
                match = slice(*text, &m[0]);
            } else if (groups == 1) {
                match = slice(*text, &m[1]);
            } else {
                /* a tuple: its first non-empty group, else the fallback */
                for (size_t g = 1; g <= groups && !match; g++)
                    if (m[g].start >= 0 && m[g].end > m[g].start) match = slice(*text, &m[g]);
                if (!match) match = em_xstrdup(step->fallback);
            }
            replace(text, em_python_strip(match));
            free(match);
        }
    }
    free(spans);
    return err;
}

/* A filter that maps the text through its row's Python str method. */
static em_status apply_str_method(const em_filter_step *step, char **text) {
    replace(text, step->row->str_method(*text));
    return NULL;
}

/* take_first keeps a document's first response; evalmesh makes one per document. */
static em_status apply_take_first(const em_filter_step *step, char **text) {
    (void)step;
    (void)text;
    return NULL;
}

static const char *const REGEX_PARAMS[] = {"regex_pattern", "group_select", "fallback", NULL};
static const char *const NO_PARAMS[] = {NULL};

const em_output_filter_row em_output_filter_rows[] = {
    {"regex", REGEX_PARAMS, apply_regex, NULL},
    {"remove_whitespace", NO_PARAMS, apply_str_method, em_python_strip},
    {"lowercase", NO_PARAMS, apply_str_method, em_python_lower},
    {"uppercase", NO_PARAMS, apply_str_method, em_python_upper},
    {"take_first", NO_PARAMS, apply_take_first, NULL},
};
const size_t em_output_filter_row_count =
    sizeof em_output_filter_rows / sizeof em_output_filter_rows[0];

const em_output_filter_row *em_output_filter_find(const char *name) {
    for (size_t i = 0; i < em_output_filter_row_count; i++)
        if (strcmp(em_output_filter_rows[i].name, name) == 0) return &em_output_filter_rows[i];
    return NULL;
}

em_status em_filter_step_regex(const char *pattern, long group_select, const char *fallback,
                               const char *what, em_filter_step *out) {
    memset(out, 0, sizeof *out);
    em_status err =
        em_python_regex_compile(pattern ? pattern : EM_REGEX_FILTER_PATTERN, what, &out->regex);
    if (err) return err;
    out->row = em_output_filter_find("regex");
    out->group_select = group_select;
    out->fallback = em_xstrdup(fallback ? fallback : EM_REGEX_FILTER_FALLBACK);
    return NULL;
}

em_status em_filter_pipeline_apply(const em_filter_pipeline *pipeline, const char *response,
                                   char **answer) {
    char *text = em_xstrdup(response);
    for (size_t i = 0; i < pipeline->step_count; i++) {
        em_status err = pipeline->steps[i].row->apply(&pipeline->steps[i], &text);
        if (err) {
            free(text);
            return em_error_prefix(err, "filter '%s', step %zu (%s)", pipeline->name, i + 1,
                                   pipeline->steps[i].row->name);
        }
    }
    *answer = text;
    return NULL;
}

void em_filter_pipeline_clear(em_filter_pipeline *pipeline) {
    for (size_t i = 0; i < pipeline->step_count; i++) {
        em_python_regex_free(pipeline->steps[i].regex);
        free(pipeline->steps[i].fallback);
    }
    free(pipeline->steps);
    free(pipeline->name);
    memset(pipeline, 0, sizeof *pipeline);
}
