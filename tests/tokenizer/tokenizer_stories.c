/* The tokenizer embedded in the stories260K model (SentencePiece, 512 tokens): its settings, a
 * TinyStories sentence encoded to the ids an independent Python reference gives
 * (spm_reference.py), every line of the TinyStories sample round-trips, and special tokens
 * (<s>) are matched only with parse_special. */
#include <stdint.h>

#include "shared_data.h"
#include "stages/tokenizer/tokenizer.h"

static int32_t *encode(const em_tokenizer *tok, const char *text, em_encode_options o, size_t *n) {
    int32_t *ids = NULL;
    em_status err = em_tokenizer_encode(tok, text, strlen(text), o, &ids, n);
    if (err) fprintf(stderr, "encode: %s\n", err->message);
    CHECK(err == NULL);
    return ids;
}

int main(void) {
    char *model = shared_path("models/stories260K.gguf");
    char *sample = shared_path("text/tinystories_sample.txt");
    em_tokenizer *tok;
    em_status err = em_tokenizer_load(model, &tok);
    CHECK(err == NULL);
    if (err) return test_finish();
    CHECK_STR_EQ(em_tokenizer_kind(tok), "llama");
    CHECK_INT_EQ(em_tokenizer_vocab_size(tok), 512);
    CHECK_INT_EQ(em_tokenizer_bos(tok), 1);
    CHECK_INT_EQ(em_tokenizer_eos(tok), 2);
    CHECK_STR_EQ(em_tokenizer_token_text(tok, 1), "<s>");
    CHECK(em_tokenizer_token_text(tok, 512) == NULL);
    em_encode_options o = em_tokenizer_default_options(tok);
    CHECK(o.add_bos && !o.add_eos && !o.parse_special); /* llama.cpp's defaults for SPM */

    /* BOS, then the reference ids of the sentence. */
    static const int32_t expected[] = {1,   403, 407, 261, 378, 432, 383, 286,
                                       261, 376, 298, 315, 421, 395, 317, 426};
    const char *sentence = "Once upon a time, there was a little girl named Lily.";
    size_t n;
    int32_t *ids = encode(tok, sentence, o, &n);
    CHECK_INT_EQ(n, sizeof expected / sizeof expected[0]);
    CHECK(ids && n == sizeof expected / sizeof expected[0] &&
          memcmp(ids, expected, sizeof expected) == 0);
    char *text;
    size_t len;
    CHECK(em_tokenizer_decode(tok, ids, n, false, &text, &len) == NULL);
    CHECK_STR_EQ(text, sentence);
    free(text);
    CHECK(em_tokenizer_decode(tok, ids, n, true, &text, &len) == NULL);
    CHECK_STR_EQ(text, "<s>Once upon a time, there was a little girl named Lily.");
    free(text);
    free(ids);

    /* Every line of the sample round-trips and uses no unknown token. */
    size_t sample_len;
    char *all = read_whole(sample, &sample_len);
    int lines = 0, ok = 0;
    for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        ids = encode(tok, line, o, &n);
        bool good = ids && n > 1 && ids[0] == 1;
        for (size_t i = 1; good && i < n; i++) good = ids[i] > 2 && ids[i] < 512;
        good = good && em_tokenizer_decode(tok, ids, n, false, &text, &len) == NULL &&
               strcmp(text, line) == 0;
        if (good) free(text);
        ok += good;
        free(ids);
    }
    CHECK(lines > 0);
    CHECK_INT_EQ(ok, lines);
    printf("stories260K: %d/%d sample lines round-trip\n", ok, lines);
    free(all);

    /* "<s>" is text unless parse_special; the "▁" put after a special token inside the text
     * stays in decode. */
    o = (em_encode_options){.parse_special = true};
    ids = encode(tok, "<s>Once", o, &n);
    CHECK(n >= 2 && ids[0] == 1);
    CHECK(em_tokenizer_decode(tok, ids, n, true, &text, &len) == NULL);
    CHECK_STR_EQ(text, "<s>Once");
    free(text);
    free(ids);
    ids = encode(tok, "Hi</s>there", o, &n);
    CHECK(n >= 3);
    CHECK(em_tokenizer_decode(tok, ids, n, true, &text, &len) == NULL);
    CHECK_STR_EQ(text, "Hi</s> there");
    free(text);
    CHECK(em_tokenizer_decode(tok, ids, n, false, &text, &len) == NULL);
    CHECK_STR_EQ(text, "Hi there");
    free(text);
    free(ids);
    o.parse_special = false;
    ids = encode(tok, "<s>Once", o, &n);
    CHECK(n > 2 && ids[0] != 1);
    CHECK(em_tokenizer_decode(tok, ids, n, false, &text, &len) == NULL);
    CHECK_STR_EQ(text, "<s>Once");
    free(text);
    free(ids);

    /* A literal "▁" reads as a space (the documented SentencePiece exception). */
    ids = encode(tok,
                 "a\xE2\x96\x81"
                 "b",
                 o, &n);
    CHECK(em_tokenizer_decode(tok, ids, n, false, &text, &len) == NULL);
    CHECK_STR_EQ(text, "a b");
    free(text);
    free(ids);

    em_tokenizer_free(tok);
    free(model);
    free(sample);
    return test_finish();
}
