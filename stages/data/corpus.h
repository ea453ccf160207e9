/* Reading an evaluation input into one token stream: plain text (one document, or documents by
 * a split rule), JSONL (one document per line, text in a chosen field) or pre-tokenized
 * little-endian uint16/uint32 id files. Documents' tokens lie end to end in the stream; each
 * keeps the word and UTF-8 byte counts of its original text (lm-evaluation-harness's
 * definitions). Documents with no text (only whitespace) or no tokens are skipped and counted.
 * Bad input is an error with exit status 2 naming the file and where in it: invalid UTF-8
 * (line, column and byte offset), a JSONL line that is not an object with a string field, a
 * token file whose size is not a whole number of ids or whose id is outside the vocabulary.
 * Text is tokenized in pieces straight into the stream; a text that is one document is read in
 * blocks (streamed_text.h), the others whole. */
#ifndef EVALMESH_CORPUS_H
#define EVALMESH_CORPUS_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"
#include "stages/data/protocol.h"
#include "stages/data/text.h"

struct em_tokenizer;

typedef enum em_input_format {
    EM_FORMAT_TEXT,
    EM_FORMAT_JSONL,
    EM_FORMAT_TOKENS_U16,
    EM_FORMAT_TOKENS_U32,
} em_input_format;

/* "text", "jsonl", "tokens_u16", "tokens_u32"; -1 when unknown. */
int em_input_format_parse(const char *name);
/* By extension: .jsonl -> jsonl, .u16/.bin16 -> tokens_u16, .u32/.bin32 -> tokens_u32, else text.
 */
em_input_format em_input_format_from_path(const char *path);

typedef struct em_corpus_options {
    em_input_format format;
    const char *text_field;   /* jsonl */
    em_split_rule split;      /* text */
    const char *separator;    /* text with EM_SPLIT_SEPARATOR */
    bool add_bos;             /* prepend BOS when tokenizing text (token files are used as given) */
    int64_t max_documents;    /* keep the first N non-empty documents; <= 0: all */
    bool wikitext_detokenize; /* score lm-eval's detokenized text (counts stay the original's) */
    int64_t max_tokens; /* text and JSONL: stop tokenizing once the stream holds this many (the
                           windows asked for need no more); <= 0: all */
    /* rolling with max_windows: stop after the document whose rolling windows of
     * rolling_max_length bring the total past this many (the plan keeps none from it on) */
    int64_t rolling_max_windows;
    int rolling_max_length;
} em_corpus_options;

typedef struct em_corpus {
    int32_t *stream; /* (n_tokens) every kept document's tokens, end to end */
    int64_t n_tokens;
    em_document_tokens *docs; /* (n_docs) kept documents, in file order */
    size_t n_docs;
    int64_t documents;       /* documents in the file (before the cap) */
    int64_t empty_documents; /* of those, skipped for having no text or no tokens */
    bool stopped_early;      /* max_tokens or rolling_max_windows reached: the rest of the text
                                was not tokenized */
    int64_t rolling_windows; /* with rolling_max_windows: the kept documents' rolling windows */
    char sha256[65];         /* of the file's bytes */
} em_corpus;

/* Reads and tokenizes path. */
em_status em_corpus_read(const char *path, const em_corpus_options *options,
                         const struct em_tokenizer *tok, em_corpus *out);
void em_corpus_free(em_corpus *corpus);

/* Appends n ids to the stream (capacity: its allocated entries, grown as needed); sets
 * stopped_early once it holds max_tokens (> 0). */
void em_corpus_append(em_corpus *corpus, size_t *capacity, const int32_t *ids, size_t n,
                      int64_t max_tokens);

#endif
