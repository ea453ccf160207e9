/* A command-line probe of the dataset building blocks, driven by test_protocols.py, which checks
 * its output against independent Python implementations of the three protocols and of
 * lm-evaluation-harness's word count.
 *   data_probe chunked N_TOKENS N_CTX BOS MAX_WINDOWS
 *   data_probe sliding N_TOKENS MAX_LENGTH STRIDE MAX_WINDOWS
 *   data_probe rolling MAX_LENGTH PREFIX MAX_WINDOWS DOC_LEN...
 *   data_probe words FILE        (one count per line of FILE's documents split by "@@@")
 *   data_probe detok FILE        (FILE after lm-eval's wikitext detokenizer, on stdout)
 * The token stream is synthetic: token i of the stream has id 1000 + i. For every window it
 * prints "doc W: input ids | scored target ids". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/data/protocol.h"
#include "stages/data/text.h"
#include "stages/data/wikitext_detok.h"

static int print_plan(em_status err, const em_window_plan *plan) {
    if (err) {
        printf("error: %s\n", err->message);
        em_error_free(err);
        return 2;
    }
    for (size_t i = 0; i < plan->count; i++) {
        const em_window_spec *w = &plan->windows[i];
        printf("%lld:", (long long)w->document);
        for (int p = 0; p < w->length; p++) {
            long long id =
                p == 0 && w->first_input >= 0 ? w->first_input : 1000 + (long long)w->start + p;
            printf(" %lld", id);
        }
        printf(" |");
        for (int p = w->score_from; p < w->length; p++)
            printf(" %lld", 1000 + (long long)w->start + 1 + p);
        printf(" | %lld %lld\n", (long long)w->words, (long long)w->bytes);
    }
    return 0;
}

static char buf[1 << 22];

static int detok(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t out_len;
    char *out = em_wikitext_detokenize(buf, len, &out_len);
    fwrite(out, 1, out_len, stdout);
    free(out);
    return 0;
}

static int words(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    em_text_span *spans;
    size_t n = em_text_split(buf, len, EM_SPLIT_SEPARATOR, "@@@", &spans);
    for (size_t i = 0; i < n; i++)
        printf("%lld\n", (long long)em_text_count_words(buf + spans[i].offset, spans[i].length));
    free(spans);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 1;
    em_window_plan plan = {0};
    int rc;
    if (strcmp(argv[1], "chunked") == 0 && argc == 6) {
        rc = print_plan(
            em_plan_chunked(atoll(argv[2]), atoi(argv[3]), atoi(argv[4]), atoll(argv[5]), &plan),
            &plan);
    } else if (strcmp(argv[1], "sliding") == 0 && argc == 6) {
        rc = print_plan(
            em_plan_sliding(atoll(argv[2]), atoi(argv[3]), atoi(argv[4]), atoll(argv[5]), &plan),
            &plan);
    } else if (strcmp(argv[1], "rolling") == 0 && argc >= 5) {
        size_t n_docs = (size_t)(argc - 5);
        em_document_tokens *docs = calloc(n_docs + 1, sizeof *docs);
        int64_t start = 0;
        for (size_t d = 0; d < n_docs; d++) {
            docs[d] =
                (em_document_tokens){start, atoll(argv[5 + d]), 10 + (int64_t)d, 100 + (int64_t)d};
            start += docs[d].count;
        }
        rc = print_plan(
            em_plan_rolling(docs, n_docs, atoi(argv[2]), atoi(argv[3]), atoll(argv[4]), &plan),
            &plan);
        free(docs);
    } else if (strcmp(argv[1], "words") == 0 && argc == 3) {
        return words(argv[2]);
    } else if (strcmp(argv[1], "detok") == 0 && argc == 3) {
        return detok(argv[2]);
    } else {
        return 1;
    }
    em_window_plan_free(&plan);
    return rc;
}
