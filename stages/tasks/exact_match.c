/* lm-evaluation-harness's exact_match (exact_match.h). */
#include "stages/tasks/exact_match.h"

#include <stdlib.h>
#include <string.h>

#include "stages/tasks/python_str.h"
#include "util/error.h"

/* Python's string.punctuation. */
static const char PUNCTUATION[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/* text without the ASCII characters of drop, in place. */
static void drop_chars(char *text, const char *drop) {
    size_t o = 0;
    for (size_t i = 0; text[i]; i++)
        if (!strchr(drop, text[i])) text[o++] = text[i];
    text[o] = '\0';
}

char *em_exact_match_normalize(const em_exact_match_options *options, const char *text) {
    char *s = em_xstrdup(text);
    for (size_t r = 0; r < options->regex_count; r++) {
        char *kept = em_python_regex_remove(options->regexes_to_ignore[r], s);
        free(s);
        s = kept;
    }
    if (options->ignore_case) {
        char *lower = em_python_lower(s);
        free(s);
        s = lower;
    }
    if (options->ignore_punctuation) drop_chars(s, PUNCTUATION);
    if (options->ignore_numbers) drop_chars(s, "0123456789");
    return s;
}

double em_exact_match(const em_exact_match_options *options, const char *prediction,
                      const char *reference) {
    char *p = em_exact_match_normalize(options, prediction);
    char *r = em_exact_match_normalize(options, reference);
    double score = strcmp(p, r) == 0 ? 1.0 : 0.0;
    free(p);
    free(r);
    return score;
}

void em_exact_match_options_clear(em_exact_match_options *options) {
    for (size_t r = 0; r < options->regex_count; r++)
        em_python_regex_free(options->regexes_to_ignore[r]);
    free(options->regexes_to_ignore);
    memset(options, 0, sizeof *options);
}
