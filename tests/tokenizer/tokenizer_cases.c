/* Every test string of a llama.cpp vocabulary test (*.gguf.inp, strings each followed by a line
 * __ggml_vocab_test__) must encode, without BOS/EOS and without parsing special tokens, to exactly
 * the ids of the matching line of *.gguf.out, and decode back to the same bytes.
 * Usage: tokenizer_cases TOKENIZER INP (both relative to the shared data folder). */
#include <stdint.h>

#include "shared_data.h"
#include "stages/tokenizer/tokenizer.h"

static const char MARKER[] = "\n__ggml_vocab_test__\n";

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tokenizer_cases TOKENIZER INP\n");
        return 2;
    }
    char *tok_path = shared_path(argv[1]);
    char *inp_path = shared_path(argv[2]);
    char out_path[4096];
    snprintf(out_path, sizeof out_path, "%.*s.out", (int)(strlen(inp_path) - 4), inp_path);
    size_t inp_len, out_len;
    char *inp = read_whole(inp_path, &inp_len);
    char *out = read_whole(out_path, &out_len);
    CHECK(inp && out);
    if (!inp || !out) return test_finish();

    em_tokenizer *tok;
    em_status err = em_tokenizer_load(tok_path, &tok);
    if (err) fprintf(stderr, "load: %s\n", err->message);
    CHECK(err == NULL);
    if (err) return test_finish();

    em_encode_options options = {.add_bos = false, .add_eos = false, .parse_special = false};
    int cases = 0, exact = 0, round_trips = 0;
    char *text = inp, *line = out;
    for (char *end; (end = strstr(text, MARKER)) != NULL; text = end + strlen(MARKER)) {
        size_t len = (size_t)(end - text);
        char *line_end = strchr(line, '\n');
        CHECK(line_end != NULL);
        if (!line_end) break;
        *line_end = 0;
        /* Expected ids: the .out line, numbers separated by spaces. */
        int32_t expected[4096];
        size_t n_expected = 0;
        for (char *p = line, *q; n_expected < 4096; p = q) {
            long v = strtol(p, &q, 10);
            if (q == p) break;
            expected[n_expected++] = (int32_t)v;
        }
        int32_t *ids;
        size_t count;
        err = em_tokenizer_encode(tok, text, len, options, &ids, &count);
        CHECK(err == NULL);
        if (err) {
            fprintf(stderr, "case %d: %s\n", cases, err->message);
            em_error_free(err);
            ids = NULL, count = 0;
        }
        bool same = count == n_expected && memcmp(ids, expected, count * sizeof(int32_t)) == 0;
        CHECK(same);
        if (!same) {
            fprintf(stderr, "case %d '%.*s'\n  expected:%s\n  got:     ", cases, (int)len, text,
                    line);
            for (size_t i = 0; i < count; i++) fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        char *decoded;
        size_t decoded_len;
        err = em_tokenizer_decode(tok, ids, count, false, &decoded, &decoded_len);
        CHECK(err == NULL);
        bool round_trip = !err && decoded_len == len && memcmp(decoded, text, len) == 0;
        CHECK(round_trip);
        if (!round_trip)
            fprintf(stderr, "case %d: decode gives '%s' for '%.*s'\n", cases,
                    err ? "(error)" : decoded, (int)len, text);
        exact += same;
        round_trips += round_trip;
        cases++;
        free(decoded);
        free(ids);
        line = line_end + 1;
    }
    CHECK(*line == 0); /* as many .out lines as test strings */
    CHECK(cases > 0);
    printf("%s: %d/%d test strings give exactly the expected ids, %d/%d round-trip\n", argv[1],
           exact, cases, round_trips, cases);
    em_tokenizer_free(tok);
    free(inp);
    free(out);
    free(tok_path);
    free(inp_path);
    return test_finish();
}
