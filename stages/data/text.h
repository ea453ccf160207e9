/* Plain text as evaluation input: UTF-8 checking, splitting a file into documents, and the
 * per-document counts lm-evaluation-harness uses for word and byte perplexity. */
#ifndef EVALMESH_TEXT_H
#define EVALMESH_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a text file becomes documents. */
typedef enum em_split_rule {
    EM_SPLIT_NONE,             /* the whole file is one document, byte for byte */
    EM_SPLIT_LINE,             /* every line is a document */
    EM_SPLIT_BLANK_LINE,       /* paragraphs: documents are separated by one or more empty lines */
    EM_SPLIT_WIKITEXT_ARTICLE, /* a line " = Title = " (one '=' each side) starts a document */
    EM_SPLIT_SEPARATOR,        /* documents are separated by a literal marker string */
} em_split_rule;

/* "none", "line", ...; -1 when unknown. */
int em_split_rule_parse(const char *name);

/* A document: a byte range of the text. */
typedef struct em_text_span {
    size_t offset;
    size_t length;
} em_text_span;

/* Splits text into documents. Except for EM_SPLIT_NONE, line breaks (\r, \n) at both ends of
 * each document are trimmed. Documents that hold only whitespace are kept (the caller skips and
 * counts them). Returns the count; *spans is malloc'd. */
size_t em_text_split(const char *text, size_t len, em_split_rule rule, const char *separator,
                     em_text_span **spans);

/* True when text has nothing but whitespace (or is empty). */
bool em_text_is_blank(const char *text, size_t len);

/* Words as lm-evaluation-harness counts them: len(re.split(r"\s+", doc)), that is one more than
 * the number of runs of (Unicode) whitespace. Expects valid UTF-8. */
int64_t em_text_count_words(const char *text, size_t len);

/* 1-based line and column (in bytes) of a byte offset. */
void em_text_line_col(const char *text, size_t offset, int64_t *line, int64_t *col);

#endif
