/* Window ranges (every window exactly once, contiguous, balanced by scored tokens, deterministic)
 * and document splitting / UTF-8 checks, on synthetic inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/data/window_ranges.h"
#include "stages/data/text.h"
#include "util/utf8.h"
#include "test.h"

/* Checks the ranges of one split: they tile 0..n, and no rank holds more than its share of the
 * total plus one window (the largest), nor less than its share minus one window. */
static void check_split(const int64_t *scored, size_t n, int world) {
    int64_t *first = malloc((size_t)(world + 1) * sizeof *first);
    em_window_ranges(scored, n, world, first);
    CHECK_INT_EQ(first[0], 0);
    CHECK_INT_EQ(first[world], (long long)n);
    int64_t total = 0, biggest = 0;
    for (size_t i = 0; i < n; i++) {
        total += scored[i];
        if (scored[i] > biggest) biggest = scored[i];
    }
    for (int r = 0; r < world; r++) {
        CHECK(first[r] <= first[r + 1]);
        int64_t load = 0;
        for (int64_t i = first[r]; i < first[r + 1]; i++) load += scored[i];
        /* load * world within total +- biggest * world */
        CHECK(load * world <= total + biggest * world);
        CHECK(load * world >= total - biggest * world);
    }
    free(first);
}

static void test_window_ranges(void) {
    /* Equal windows split evenly; 10 windows over 4 ranks go 2,3,2,3 by the middle-token rule:
     * window i's middle is at (i + 0.5) / 10 of the total, owned by rank floor(4 (i + 0.5) / 10).
     */
    int64_t eq[10];
    for (int i = 0; i < 10; i++) eq[i] = 7;
    int64_t first[5];
    em_window_ranges(eq, 10, 4, first);
    CHECK_INT_EQ(first[1], 2);
    CHECK_INT_EQ(first[2], 5);
    CHECK_INT_EQ(first[3], 7);
    CHECK_INT_EQ(first[4], 10);
    /* Fewer windows than ranks: some ranks get none, every window is owned once. */
    int64_t two[2] = {5, 5};
    int64_t f5[6];
    em_window_ranges(two, 2, 5, f5);
    CHECK_INT_EQ(f5[0], 0);
    CHECK_INT_EQ(f5[1], 0);
    CHECK_INT_EQ(f5[2], 1);
    CHECK_INT_EQ(f5[3], 1);
    CHECK_INT_EQ(f5[4], 2);
    CHECK_INT_EQ(f5[5], 2);
    /* No windows at all. */
    int64_t f3[4];
    em_window_ranges(NULL, 0, 3, f3);
    CHECK_INT_EQ(f3[3], 0);
    CHECK_INT_EQ(f3[1], 0);
    /* One big window among small ones (rolling's last windows are short). */
    int64_t skew[6] = {100, 1, 1, 1, 1, 1};
    int64_t f2[3];
    em_window_ranges(skew, 6, 2, f2);
    CHECK_INT_EQ(f2[1], 1);
    /* Random sizes for many world sizes. */
    srand(7);
    int64_t sizes[200];
    for (int i = 0; i < 200; i++) sizes[i] = 1 + rand() % 300;
    for (int world = 1; world <= 13; world++) check_split(sizes, 200, world);
    check_split(sizes, 3, 8);
    /* Huge totals do not overflow: window 2 (1 token) sits just before 2/3 of the total. */
    int64_t huge[4] = {INT64_C(1) << 60, INT64_C(1) << 60, 1, INT64_C(1) << 60};
    int64_t fh[4];
    em_window_ranges(huge, 4, 3, fh);
    CHECK_INT_EQ(fh[1], 1);
    CHECK_INT_EQ(fh[2], 3);
    CHECK_INT_EQ(fh[3], 4);
}

/* The documents of text under rule, joined as "[doc]" for one comparison. */
static char *split(const char *text, em_split_rule rule, const char *sep) {
    em_text_span *spans;
    size_t n = em_text_split(text, strlen(text), rule, sep, &spans);
    char *out = calloc(1, strlen(text) + 3 * n + 1);
    for (size_t i = 0; i < n; i++) {
        strcat(out, "[");
        strncat(out, text + spans[i].offset, spans[i].length);
        strcat(out, "]");
    }
    free(spans);
    return out;
}

static void test_split(void) {
    char *s = split("a\nb c\n\nd\n", EM_SPLIT_NONE, NULL);
    CHECK_STR_EQ(s, "[a\nb c\n\nd\n]");
    free(s);
    s = split("a\nb c\n\nd\n", EM_SPLIT_LINE, NULL);
    CHECK_STR_EQ(s, "[a][b c][][d]");
    free(s);
    s = split("\n\np1 l1\np1 l2\n \n\n\np2\r\n\r\np3", EM_SPLIT_BLANK_LINE, NULL);
    CHECK_STR_EQ(s, "[p1 l1\np1 l2][p2][p3]");
    free(s);
    s = split("one<|doc|>\ntwo\n<|doc|><|doc|>three", EM_SPLIT_SEPARATOR, "<|doc|>");
    CHECK_STR_EQ(s, "[one][two][][three]");
    free(s);
    const char *wiki = " \n = Alpha = \n \n Text a . \n \n = = Section = = \n \n More a . \n"
                       " = Beta = \n \n Text b . \n";
    s = split(wiki, EM_SPLIT_WIKITEXT_ARTICLE, NULL);
    CHECK_STR_EQ(s, "[ ][ = Alpha = \n \n Text a . \n \n = = Section = = \n \n More a . ]"
                    "[ = Beta = \n \n Text b . ]");
    free(s);
    CHECK_INT_EQ(em_split_rule_parse("blank_line"), EM_SPLIT_BLANK_LINE);
    CHECK_INT_EQ(em_split_rule_parse("paragraph"), -1);
    CHECK(em_text_is_blank(" \n\t", 3));
    CHECK(em_text_is_blank("", 0));
    CHECK(!em_text_is_blank(" x", 2));
}

static void test_utf8(void) {
    const char ok[] = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80";
    CHECK_INT_EQ(em_utf8_invalid_offset(ok, strlen(ok)), strlen(ok));
    const char bad_lead[] = "abc\xff";
    CHECK_INT_EQ(em_utf8_invalid_offset(bad_lead, 4), 3);
    const char truncated[] = "ab\xe2\x82";
    CHECK_INT_EQ(em_utf8_invalid_offset(truncated, 4), 2);
    const char overlong[] = "a\xc0\xafz";
    CHECK_INT_EQ(em_utf8_invalid_offset(overlong, 4), 1);
    const char surrogate[] = "a\xed\xa0\x80";
    CHECK_INT_EQ(em_utf8_invalid_offset(surrogate, 4), 1);
    int64_t line, col;
    em_text_line_col("ab\ncd\nef", 7, &line, &col);
    CHECK_INT_EQ(line, 3);
    CHECK_INT_EQ(col, 2);
    em_text_line_col("ab", 0, &line, &col);
    CHECK_INT_EQ(line, 1);
    CHECK_INT_EQ(col, 1);
}

int main(void) {
    test_window_ranges();
    test_split();
    test_utf8();
    return test_finish();
}
