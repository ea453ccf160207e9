/* `evalmesh tokenize MODEL_OR_TOKENIZER (--text-file F | TEXT) [--no-bos] [--ids-only]
 * [--parse-special] [--split-marker S]`: the token ids of a text, to compare with other tools.
 * One line of ids per input; without --ids-only each token follows on its own line as the
 * vocabulary spells it. With --split-marker the file holds several inputs, each followed by a
 * line that is exactly S (llama.cpp's *.inp test files use __ggml_vocab_test__). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "stages/tokenizer/tokenizer.h"

static const char USAGE[] =
    "usage: evalmesh tokenize MODEL_OR_TOKENIZER (--text-file F | TEXT) [--no-bos] [--ids-only]\n"
    "                         [--parse-special] [--split-marker S]\n\n"
    "Prints the token ids of the text, separated by spaces, one line per input.\n"
    "MODEL_OR_TOKENIZER is a GGUF file, a Hugging Face tokenizer.json, or a folder holding one.\n\n"
    "  --text-file F      read the text from F (the whole file is one input)\n"
    "  --split-marker S   F holds several inputs, each followed by a line that is exactly S\n"
    "  --no-bos           do not add BOS (by default the tokenizer file decides)\n"
    "  --ids-only         print only the ids (otherwise each token follows on its own line)\n"
    "  --parse-special    match special tokens such as <|begin_of_text|> in the text\n\n"
    "Exit status 2: a bad argument, an unreadable or invalid tokenizer, or text that is not\n"
    "valid UTF-8 (the message names the input and the byte offset).\n";

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = em_xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = em_xrealloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Prints a token's text quoted, with control characters escaped. */
static void print_token(const em_tokenizer *tok, int32_t id) {
    const char *text = em_tokenizer_token_text(tok, id);
    printf("%8d -> '", id);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '\n')
            printf("\\n");
        else if (*p == '\t')
            printf("\\t");
        else if (*p == '\r')
            printf("\\r");
        else if (*p == '\\' || *p == '\'')
            printf("\\%c", *p);
        else if (*p < 0x20 || *p == 0x7F)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
    printf("'\n");
}

static int tokenize_one(const em_tokenizer *tok, const char *text, size_t len,
                        em_encode_options options, bool ids_only, const char *where) {
    int32_t *ids;
    size_t count;
    em_status err = em_tokenizer_encode(tok, text, len, options, &ids, &count);
    if (err) {
        fprintf(stderr, "tokenize: %s: %s\n", where, err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    for (size_t i = 0; i < count; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    if (!ids_only)
        for (size_t i = 0; i < count; i++) print_token(tok, ids[i]);
    free(ids);
    return 0;
}

/* Runs every input of a --split-marker file: each is followed by "\nS\n" (or "\nS" at the end);
 * text after the last marker, if any, is one more input. */
static int tokenize_split(const em_tokenizer *tok, const char *path, const char *data, size_t len,
                          const char *marker, em_encode_options options, bool ids_only) {
    size_t m = strlen(marker);
    size_t start = 0;
    int input = 1;
    while (start < len) {
        /* The input ends where a line holding only the marker begins. */
        size_t end = start, next = len;
        bool found = false;
        for (size_t i = start; i + m <= len; i++) {
            bool line_start = i == 0 || data[i - 1] == '\n';
            bool line_end = i + m == len || data[i + m] == '\n';
            if (line_start && line_end && memcmp(data + i, marker, m) == 0) {
                end = i > start ? i - 1 : i; /* without the newline before the marker */
                next = i + m < len ? i + m + 1 : len;
                found = true;
                break;
            }
        }
        if (!found) end = len;
        char where[512];
        snprintf(where, sizeof where, "%s: input %d", path, input++);
        int rc = tokenize_one(tok, data + start, end - start, options, ids_only, where);
        if (rc) return rc;
        start = next;
    }
    return 0;
}

static int tokenize_main(int argc, char **argv) {
    static const struct option flags[] = {
        {"no-bos", no_argument, NULL, 'b'},
        {"ids-only", no_argument, NULL, 'i'},
        {"parse-special", no_argument, NULL, 'p'},
        {"text-file", required_argument, NULL, 'f'},
        {"split-marker", required_argument, NULL, 'm'},
        {0},
    };
    const char *text_file = NULL, *marker = NULL;
    bool no_bos = false, ids_only = false, parse_special = false;
    int c;
    while ((c = em_cli_option("tokenize", argc, argv, "", flags)) != -1) {
        if (c == 'b')
            no_bos = true;
        else if (c == 'i')
            ids_only = true;
        else if (c == 'p')
            parse_special = true;
        else if (c == 'f')
            text_file = optarg;
        else if (c == 'm')
            marker = optarg;
        else
            return EM_EXIT_BAD_INPUT;
    }
    const char *model = optind < argc ? argv[optind] : NULL;
    const char *text = optind + 1 < argc ? argv[optind + 1] : NULL;
    if (optind + 2 < argc) return em_cli_unexpected("tokenize", argv[optind + 2]);
    if (!model || (!text == !text_file) || (marker && !text_file)) {
        fprintf(stderr,
                "tokenize: give a tokenizer and either TEXT or --text-file F "
                "(--split-marker needs --text-file)\n\n%s",
                USAGE);
        return EM_EXIT_BAD_INPUT;
    }
    em_tokenizer *tok;
    em_status err = em_tokenizer_load(model, &tok);
    if (err) {
        fprintf(stderr, "tokenize: %s\n", err->message);
        int code = err->exit_code;
        em_error_free(err);
        return code;
    }
    em_encode_options options = em_tokenizer_default_options(tok);
    if (no_bos) options.add_bos = false;
    options.parse_special = parse_special;
    int rc;
    if (text) {
        rc = tokenize_one(tok, text, strlen(text), options, ids_only, "TEXT");
    } else {
        size_t len;
        char *data = read_file(text_file, &len);
        if (!data) {
            fprintf(stderr, "tokenize: %s: cannot read the text file\n", text_file);
            em_tokenizer_free(tok);
            return EM_EXIT_BAD_INPUT;
        }
        rc = marker ? tokenize_split(tok, text_file, data, len, marker, options, ids_only)
                    : tokenize_one(tok, data, len, options, ids_only, text_file);
        free(data);
    }
    em_tokenizer_free(tok);
    return rc;
}

const em_command em_command_tokenize = {
    .name = "tokenize",
    .summary = "print the token ids of a text (GGUF or tokenizer.json tokenizers)",
    .usage = USAGE,
    .main = tokenize_main,
};
