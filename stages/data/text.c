/* Text splitting, UTF-8 checking and lm-evaluation-harness word counts (see text.h). */
#include "stages/data/text.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/utf8.h"

static const char *rule_names[] = {"none", "line", "blank_line", "wikitext_article", "separator"};

int em_split_rule_parse(const char *name) {
    for (int i = 0; i < (int)(sizeof rule_names / sizeof *rule_names); i++)
        if (strcmp(rule_names[i], name) == 0) return i;
    return -1;
}

/* Python's str.isspace(), which is what \s matches in a str pattern. */
static bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

int64_t em_text_count_words(const char *text, size_t len) {
    int64_t runs = 0;
    bool in_space = false;
    size_t i = 0;
    while (i < len) {
        uint32_t cp = 0xFFFD;
        size_t n = em_utf8_decode_checked(text + i, len - i, &cp);
        if (!n) n = 1; /* callers check UTF-8 first; count a stray byte as a letter */
        bool space = is_space(cp);
        if (space && !in_space) runs++;
        in_space = space;
        i += n;
    }
    return runs + 1;
}

bool em_text_is_blank(const char *text, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint32_t cp = 0xFFFD;
        size_t n = em_utf8_decode_checked(text + i, len - i, &cp);
        if (!n) return false;
        if (!is_space(cp)) return false;
        i += n;
    }
    return true;
}

void em_text_line_col(const char *text, size_t offset, int64_t *line, int64_t *col) {
    int64_t l = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            l++;
            line_start = i + 1;
        }
    }
    *line = l;
    *col = (int64_t)(offset - line_start) + 1;
}

/* A growable list of spans. */
typedef struct span_list {
    em_text_span *items;
    size_t count, cap;
} span_list;

/* Adds text[begin, end) with line breaks trimmed from both ends. */
static void add_trimmed(span_list *list, const char *text, size_t begin, size_t end) {
    while (begin < end && (text[begin] == '\n' || text[begin] == '\r')) begin++;
    while (end > begin && (text[end - 1] == '\n' || text[end - 1] == '\r')) end--;
    if (list->count == list->cap) {
        list->cap = list->cap ? 2 * list->cap : 64;
        list->items = em_xrealloc(list->items, list->cap * sizeof *list->items);
    }
    list->items[list->count++] = (em_text_span){begin, end - begin};
}

/* The end of the line starting at i (the offset of its '\n', or len). */
static size_t line_end(const char *text, size_t len, size_t i) {
    const char *nl = memchr(text + i, '\n', len - i);
    return nl ? (size_t)(nl - text) : len;
}

/* A line that is empty or holds only spaces, tabs and '\r'. */
static bool line_is_empty(const char *text, size_t begin, size_t end) {
    for (size_t i = begin; i < end; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') return false;
    return true;
}

/* " = Title = ": starts with " = ", ends with " = " (ignoring a trailing space or '\r'), and the
 * title does not start with '=' (that would be a section heading " = = Section = = "). */
static bool is_wikitext_title(const char *text, size_t begin, size_t end) {
    while (end > begin && (text[end - 1] == ' ' || text[end - 1] == '\r')) end--;
    size_t n = end - begin;
    if (n < 5 || memcmp(text + begin, " = ", 3) != 0) return false;
    if (text[begin + 3] == '=') return false;
    return text[end - 1] == '=' && text[end - 2] == ' ' && text[end - 3] != '=';
}

size_t em_text_split(const char *text, size_t len, em_split_rule rule, const char *separator,
                     em_text_span **spans) {
    span_list list = {0};
    if (rule == EM_SPLIT_NONE) {
        list.items = em_xmalloc(sizeof *list.items);
        list.items[0] = (em_text_span){0, len};
        *spans = list.items;
        return 1;
    }
    if (rule == EM_SPLIT_SEPARATOR) {
        size_t sep_len = strlen(separator), begin = 0;
        for (size_t i = 0; sep_len && i + sep_len <= len;) {
            if (memcmp(text + i, separator, sep_len) == 0) {
                add_trimmed(&list, text, begin, i);
                i += sep_len;
                begin = i;
            } else {
                i++;
            }
        }
        add_trimmed(&list, text, begin, len);
        *spans = list.items;
        return list.count;
    }
    /* Line-based rules: walk the lines and decide where documents begin and end. */
    size_t doc_begin = 0;
    bool in_doc = rule == EM_SPLIT_WIKITEXT_ARTICLE; /* text before the first title is a document */
    for (size_t i = 0; i <= len;) {
        size_t end = line_end(text, len, i);
        switch (rule) {
        case EM_SPLIT_LINE:
            if (i < len) add_trimmed(&list, text, i, end); /* no document after a final '\n' */
            break;
        case EM_SPLIT_BLANK_LINE:
            if (line_is_empty(text, i, end)) {
                if (in_doc) add_trimmed(&list, text, doc_begin, i);
                in_doc = false;
            } else if (!in_doc) {
                doc_begin = i;
                in_doc = true;
            }
            break;
        case EM_SPLIT_WIKITEXT_ARTICLE:
            if (is_wikitext_title(text, i, end)) {
                if (i > doc_begin) add_trimmed(&list, text, doc_begin, i);
                doc_begin = i;
            }
            break;
        default:
            break;
        }
        if (end >= len) break;
        i = end + 1;
    }
    if (rule == EM_SPLIT_BLANK_LINE && in_doc) add_trimmed(&list, text, doc_begin, len);
    if (rule == EM_SPLIT_WIKITEXT_ARTICLE) add_trimmed(&list, text, doc_begin, len);
    *spans = list.items;
    return list.count;
}
