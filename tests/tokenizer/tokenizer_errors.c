/* Bad input for the tokenizers, each with its exact message and exit status 2, and small
 * hand-made vocabularies whose ids can be worked out by hand: GGUF images built in memory
 * (tiny_gguf.h) and tokenizer.json files written to a temporary folder. Needs no shared data. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "stages/formats/gguf.h"
#include "stages/tokenizer/tokenizer.h"
#include "test.h"
#include "tiny_gguf.h"

static char dir[64];

/* The error message of building a tokenizer from a GGUF image (NULL when it loads). */
static char *gguf_error(tiny_gguf *g, em_tokenizer **out) {
    em_gguf *file;
    em_status err = em_gguf_parse(g->data, g->len, "tiny.gguf", &file);
    CHECK(err == NULL);
    if (err) return strdup(err->message);
    em_tokenizer *tok = NULL;
    err = em_tokenizer_from_gguf(file, &tok);
    em_gguf_close(file);
    free(g->data);
    if (out)
        *out = tok;
    else
        em_tokenizer_free(tok);
    if (!err) return NULL;
    CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
    char *msg = strdup(err->message);
    em_error_free(err);
    return msg;
}

#define CHECK_ERROR(msg, expected)                                                                 \
    do {                                                                                           \
        char *m_ = (msg);                                                                          \
        CHECK_STR_EQ(m_, expected);                                                                \
        free(m_);                                                                                  \
    } while (0)

/* A byte-level vocabulary: the 256 byte characters, then "ab", "Ġa"; merges "a b", "Ġ a". */
static const char *BYTE_TOKENS[258];
static char byte_texts[256][3];

static void fill_byte_tokens(void) {
    tg_byte_tokens(byte_texts, BYTE_TOKENS);
    BYTE_TOKENS[256] = "ab";
    BYTE_TOKENS[257] = "\xC4\xA0"
                       "a"; /* "Ġa" */
}

static tiny_gguf gpt2_gguf(const char *pre, size_t n_tokens, const char *const *merges,
                           size_t n_merges) {
    tiny_gguf g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "gpt2");
    if (pre) tg_kv_string(&g, "tokenizer.ggml.pre", pre);
    tg_kv_strings(&g, "tokenizer.ggml.tokens", BYTE_TOKENS, n_tokens);
    tg_kv_strings(&g, "tokenizer.ggml.merges", merges, n_merges);
    return g;
}

static void test_gguf_errors(void) {
    static const char *merges[] = {"a b", "\xC4\xA0 a"};
    tiny_gguf g = tg_begin();
    tg_kv_string(&g, "general.name", "no tokenizer");
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: metadata key 'tokenizer.ggml.model' is missing (no tokenizer in this "
                "file)");

    g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "bert");
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: tokenizer.ggml.model 'bert' is not supported (supported: llama, gpt2)");

    g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "llama");
    CHECK_ERROR(gguf_error(&g, NULL), "tiny.gguf: metadata key 'tokenizer.ggml.tokens' is missing");

    g = gpt2_gguf("qwen9", 258, merges, 2);
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: tokenizer.ggml.pre 'qwen9' is not a pre-tokenizer llama.cpp knows (the "
                "closest known one is 'qwen2')");
    g = gpt2_gguf("gemma4", 258, merges, 2);
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: tokenizer.ggml.pre 'gemma4' is not supported: it is BPE over raw UTF-8 "
                "with \"\xE2\x96\x81\" for spaces, not byte-level BPE, which evalmesh does not "
                "run yet");

    static const char *bad_merges[] = {"a b", "a bx"};
    g = gpt2_gguf("gpt-2", 258, bad_merges, 2);
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: tokenizer.ggml.merges: merge 1 'a bx' refers to unknown token 'bx'");

    static const char *no_space[] = {"ab"};
    g = gpt2_gguf("gpt-2", 258, no_space, 1);
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: tokenizer.ggml.merges: merge 0 'ab' is not two tokens separated by a "
                "space");

    static const char *unmade[] = {"b a"};
    g = gpt2_gguf("gpt-2", 258, unmade, 1);
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: tokenizer.ggml.merges: merge 0 'b a' makes 'ba', which is not in the "
                "vocabulary");

    g = gpt2_gguf(NULL, 258, merges, 0);
    float scores[3] = {0};
    tg_kv_f32s(&g, "tokenizer.ggml.scores", scores, 3);
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: metadata key 'tokenizer.ggml.scores' has 3 entries, expected 258 (one "
                "per token)");

    g = gpt2_gguf(NULL, 258, merges, 2);
    tg_kv_u32(&g, "tokenizer.ggml.bos_token_id", 258);
    CHECK_ERROR(gguf_error(&g, NULL), "tiny.gguf: BOS id 258 is out of range (258 tokens)");

    g = gpt2_gguf(NULL, 258, merges, 2);
    tg_kv_string(&g, "tokenizer.ggml.add_bos_token", "yes");
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: metadata key 'tokenizer.ggml.add_bos_token' has type string, expected "
                "a bool");

    g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "gpt2");
    tg_kv_strings(&g, "tokenizer.ggml.tokens", BYTE_TOKENS, 258);
    CHECK_ERROR(gguf_error(&g, NULL),
                "tiny.gguf: metadata key 'tokenizer.ggml.merges' is missing (a gpt2 tokenizer "
                "needs its merges)");
}

static void encode_check(const em_tokenizer *tok, const char *text, size_t len,
                         const int32_t *expected, size_t n_expected) {
    int32_t *ids;
    size_t n;
    em_encode_options o = {0};
    em_status err = em_tokenizer_encode(tok, text, len, o, &ids, &n);
    CHECK(err == NULL);
    if (err) return;
    CHECK_INT_EQ(n, n_expected);
    CHECK(n == n_expected && memcmp(ids, expected, n * sizeof(int32_t)) == 0);
    char *back;
    size_t back_len;
    CHECK(em_tokenizer_decode(tok, ids, n, false, &back, &back_len) == NULL);
    CHECK(back_len == len && memcmp(back, text, len) == 0);
    free(back);
    free(ids);
}

static char *encode_error(const em_tokenizer *tok, const char *text, size_t len) {
    int32_t *ids;
    size_t n;
    em_status err = em_tokenizer_encode(tok, text, len, (em_encode_options){0}, &ids, &n);
    CHECK(err != NULL && ids == NULL && n == 0);
    if (!err) {
        free(ids);
        return NULL;
    }
    CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
    char *msg = strdup(err->message);
    em_error_free(err);
    return msg;
}

static void test_tiny_bpe(void) {
    static const char *merges[] = {"a b", "\xC4\xA0 a"};
    tiny_gguf g = gpt2_gguf("gpt-2", 258, merges, 2);
    em_tokenizer *tok;
    CHECK(gguf_error(&g, &tok) == NULL);
    if (!tok) return;
    /* "ab ab": words "ab" and " ab"; "a b" (rank 0) merges before "Ġ a" (rank 1), so " ab"
     * becomes [Ġ][ab]. Byte b's token is b here (the byte characters come first). */
    int32_t space = -1;
    for (int b = 0; b < 256; b++)
        if (strcmp(BYTE_TOKENS[b], "\xC4\xA0") == 0) space = b;
    CHECK_INT_EQ(space, ' ');
    int32_t expected[] = {256, ' ', 256};
    encode_check(tok, "ab ab", 5, expected, 3);
    /* " a" merges to "Ġa" (257); every byte encodes, NUL included. */
    int32_t expected3[] = {257};
    encode_check(tok, " a", 2, expected3, 1);
    int32_t expected4[] = {'x', 0, 'y'};
    encode_check(tok, "x\0y", 3, expected4, 3);

    /* Invalid UTF-8: each case names the offset of the first bad byte. */
    CHECK_ERROR(encode_error(tok, "abc\xFF", 4),
                "text is not valid UTF-8 at byte offset 3 (byte 0xFF)");
    CHECK_ERROR(encode_error(tok, "ab\xC3", 3),
                "text is not valid UTF-8 at byte offset 2 (byte 0xC3)"); /* truncated */
    CHECK_ERROR(encode_error(tok, "\xC0\x80", 2),
                "text is not valid UTF-8 at byte offset 0 (byte 0xC0)"); /* overlong NUL */
    CHECK_ERROR(encode_error(tok, "a\xE0\x80\x80", 4),
                "text is not valid UTF-8 at byte offset 1 (byte 0xE0)"); /* overlong */
    CHECK_ERROR(encode_error(tok, "ok \xED\xA0\x80", 6),
                "text is not valid UTF-8 at byte offset 3 (byte 0xED)"); /* surrogate */
    CHECK_ERROR(encode_error(tok, "\xF4\x90\x80\x80", 4),
                "text is not valid UTF-8 at byte offset 0 (byte 0xF4)"); /* past U+10FFFF */
    CHECK_ERROR(encode_error(tok, "a\x80", 2),
                "text is not valid UTF-8 at byte offset 1 (byte 0x80)"); /* stray continuation */

    /* No BOS in this vocabulary. */
    int32_t *ids;
    size_t n;
    em_status err =
        em_tokenizer_encode(tok, "a", 1, (em_encode_options){.add_bos = true}, &ids, &n);
    CHECK(err != NULL);
    if (err) CHECK_STR_EQ(err->message, "cannot add BOS: the tokenizer has no BOS token");
    em_error_free(err);

    /* Decoding an id out of range. */
    int32_t bad[] = {1, 258};
    char *text;
    size_t len;
    err = em_tokenizer_decode(tok, bad, 2, false, &text, &len);
    CHECK(err != NULL);
    if (err)
        CHECK_STR_EQ(err->message,
                     "token 1: id 258 is out of range (the vocabulary has 258 tokens)");
    em_error_free(err);
    em_tokenizer_free(tok);

    /* A vocabulary without some byte's character cannot encode that byte. */
    g = gpt2_gguf(NULL, 200, merges, 0);
    CHECK(gguf_error(&g, &tok) == NULL);
    if (!tok) return;
    CHECK_ERROR(encode_error(tok, "xy\xE2\x82\xAC", 5), /* "€": byte 0xE2 (226) has no token here */
                "cannot encode byte 0xE2 at byte offset 2: the vocabulary has no token for it");
    em_tokenizer_free(tok);
}

/* Numbers: Llama 3 splits digits in threes ("123", "45": the merge "1 2" applies), Qwen2 one by
 * one (no merge can apply). */
static void test_digits(void) {
    const char *tokens[257];
    memcpy(tokens, BYTE_TOKENS, 256 * sizeof(char *));
    tokens[256] = "12";
    static const char *merges[] = {"1 2"};
    const char *pres[] = {"llama3", "qwen2"};
    static const int32_t llama3[] = {256, '3', '4', '5'};
    static const int32_t qwen2[] = {'1', '2', '3', '4', '5'};
    for (int k = 0; k < 2; k++) {
        tiny_gguf g = tg_begin();
        tg_kv_string(&g, "tokenizer.ggml.model", "gpt2");
        tg_kv_string(&g, "tokenizer.ggml.pre", pres[k]);
        tg_kv_strings(&g, "tokenizer.ggml.tokens", tokens, 257);
        tg_kv_strings(&g, "tokenizer.ggml.merges", merges, 1);
        em_tokenizer *tok;
        CHECK(gguf_error(&g, &tok) == NULL);
        if (!tok) return;
        if (k == 0)
            encode_check(tok, "12345", 5, llama3, 4);
        else
            encode_check(tok, "12345", 5, qwen2, 5);
        em_tokenizer_free(tok);
    }
}

/* SentencePiece: "▁a", "b", "▁ab" ... no byte tokens; with and without an unknown token. */
static void test_tiny_spm(void) {
    static const char *tokens[] = {"<unk>",
                                   "<s>",
                                   "\xE2\x96\x81",
                                   "a",
                                   "b",
                                   "\xE2\x96\x81"
                                   "a",
                                   "\xE2\x96\x81"
                                   "ab"};
    static const float scores[] = {0, 0, -1, -2, -3, -1.5f, -0.5f};
    static const int32_t types[] = {2, 3, 1, 1, 1, 1, 1};
    tiny_gguf g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "llama");
    tg_kv_strings(&g, "tokenizer.ggml.tokens", tokens, 7);
    tg_kv_f32s(&g, "tokenizer.ggml.scores", scores, 7);
    tg_kv_i32s(&g, "tokenizer.ggml.token_type", types, 7);
    em_tokenizer *tok;
    CHECK(gguf_error(&g, &tok) == NULL);
    if (!tok) return;
    int32_t ab[] = {6}; /* "▁ab" */
    encode_check(tok, "ab", 2, ab, 1);
    int32_t ab_a[] = {6, 5}; /* "▁ab", "▁a" */
    encode_check(tok, "ab a", 4, ab_a, 2);
    /* "c" has neither a token nor a byte token: the unknown token. */
    int32_t *ids;
    size_t n;
    CHECK(em_tokenizer_encode(tok, "ac", 2, (em_encode_options){0}, &ids, &n) == NULL);
    CHECK_INT_EQ(n, 2);
    if (n == 2) CHECK(ids[0] == 5 && ids[1] == 0);
    free(ids);
    em_tokenizer_free(tok);

    /* Without an unknown token, "c" is an error naming its offset. */
    g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "llama");
    tg_kv_strings(&g, "tokenizer.ggml.tokens", tokens + 1, 6);
    tg_kv_u32(&g, "tokenizer.ggml.unknown_token_id", UINT32_MAX);
    tg_kv_u32(&g, "tokenizer.ggml.bos_token_id", 0);
    tg_kv_u32(&g, "tokenizer.ggml.eos_token_id", UINT32_MAX);
    CHECK(gguf_error(&g, &tok) == NULL);
    if (!tok) return;
    CHECK_ERROR(encode_error(tok, "ab c", 4),
                "cannot encode the text at byte offset 3: the vocabulary has no token for 'c', no "
                "byte token <0x63> and no unknown token");
    em_tokenizer_free(tok);
}

/* What Gemma-style SentencePiece vocabularies use: add_space_prefix false, byte fallback through
 * <0xNN> tokens, user-defined tokens matched in any text, control tokens only with
 * parse_special, and no "▁" added after either. */
static void test_spm_no_prefix(void) {
    static const char *tokens[] = {"<unk>",
                                   "<s>",
                                   "</s>",
                                   "<start_of_turn>",
                                   "\n\n",
                                   "<0xC3>",
                                   "<0xA9>",
                                   "a",
                                   "b",
                                   "ab",
                                   "\xE2\x96\x81"
                                   "ab",
                                   "\xE2\x96\x81"};
    static const float scores[] = {0, 0, 0, 0, 0, 0, 0, -3, -3, -1, -0.5f, -4};
    static const int32_t types[] = {2, 3, 3, 3, 4, 6, 6, 1, 1, 1, 1, 1};
    tiny_gguf g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "llama");
    tg_kv_strings(&g, "tokenizer.ggml.tokens", tokens, 12);
    tg_kv_f32s(&g, "tokenizer.ggml.scores", scores, 12);
    tg_kv_i32s(&g, "tokenizer.ggml.token_type", types, 12);
    tg_kv_bool(&g, "tokenizer.ggml.add_space_prefix", false);
    em_tokenizer *tok;
    CHECK(gguf_error(&g, &tok) == NULL);
    if (!tok) return;
    int32_t ab[] = {9}; /* "ab", no "▁" in front */
    encode_check(tok, "ab", 2, ab, 1);
    int32_t space_ab[] = {10}; /* "▁ab" */
    encode_check(tok, " ab", 3, space_ab, 1);
    int32_t e_acute[] = {7, 5, 6, 8}; /* "a", <0xC3>, <0xA9>, "b": byte fallback */
    encode_check(tok,
                 "a\xC3\xA9"
                 "b",
                 4, e_acute, 4);
    int32_t user[] = {7, 4, 9}; /* "a", user-defined "\n\n", then "ab" without "▁" */
    encode_check(tok, "a\n\nab", 5, user, 3);
    /* A control token only with parse_special, and no "▁" after it. */
    int32_t *ids;
    size_t n;
    em_encode_options special = {.parse_special = true};
    CHECK(em_tokenizer_encode(tok, "<start_of_turn>ab", 17, special, &ids, &n) == NULL);
    CHECK_INT_EQ(n, 2);
    if (n == 2) CHECK(ids[0] == 3 && ids[1] == 9);
    free(ids);
    em_tokenizer_free(tok);
}

static void write_file(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static char *json_error(const char *json) {
    write_file("tokenizer.json", json);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    em_tokenizer *tok;
    em_status err = em_tokenizer_load(path, &tok);
    CHECK(err != NULL);
    if (!err) {
        em_tokenizer_free(tok);
        return NULL;
    }
    CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
    /* Messages name the file: print them relative to the folder. */
    const char *m = err->message;
    if (strncmp(m, dir, strlen(dir)) == 0) m += strlen(dir) + 1;
    char *msg = strdup(m);
    em_error_free(err);
    return msg;
}

#define PRE_LLAMA3                                                                                 \
    "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "       \
    "\"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{" \
    "L}+|\\\\p{N}{1,3}| "                                                                          \
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)"                  \
    "|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "       \
    "\"add_prefix_space\": false, \"use_regex\": false}]}"

static void test_json(void) {
    CHECK_ERROR(json_error("{\"model\": {\"type\": \"BPE\",\n  \"vocab\": {\"a\": 0,}}}"),
                "tokenizer.json:2:21: invalid JSON");
    CHECK_ERROR(json_error("{\"model\": {\"type\": \"Unigram\"}}"),
                "tokenizer.json: model.type 'Unigram' is not supported (only BPE)");
    CHECK_ERROR(json_error("{\"model\": {\"type\": \"BPE\"}, " PRE_LLAMA3 "}"),
                "tokenizer.json: key 'model.vocab' is missing or has the wrong type");
    CHECK_ERROR(
        json_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                   "\"pre_tokenizer\": {\"type\": \"Whitespace\"}}"),
        "tokenizer.json: pre_tokenizer type 'Whitespace' is not supported (ByteLevel, "
        "Split, Digits, Sequence)");
    CHECK_ERROR(
        json_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                   "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                   "\"Split\", \"pattern\": {\"Regex\": \"\\\\w+\"}, \"behavior\": "
                   "\"Isolated\"}, {\"type\": \"Digits\", \"individual_digits\": true}, "
                   "{\"type\": \"ByteLevel\", \"use_regex\": false}]}}"),
        "tokenizer.json: pre_tokenizer splits with '\\w+', then '\\p{N}', which is no "
        "pre-tokenizer llama.cpp knows");
    CHECK_ERROR(
        json_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": "
                   "2}, \"merges\": [\"a b\", \"a bx\"]}, " PRE_LLAMA3 "}"),
        "tokenizer.json: merge 1 'a bx' refers to unknown token 'bx'");
    CHECK_ERROR(json_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 2}, "
                           "\"merges\": []}, " PRE_LLAMA3 "}"),
                "tokenizer.json: no token has id 1 (ids must be 0 to 2)");
    CHECK_ERROR(
        json_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, " PRE_LLAMA3 "}"),
        "tokenizer.json: key 'model.merges' is missing or has the wrong type");

    /* A good one: merges as pairs, an added special token, BOS through the post-processor. */
    const char *good =
        "{\"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"vocab\": {\"a\": 0, \"b\": 1, "
        "\"ab\": 2, \"c\": 3}, \"merges\": [[\"a\", \"b\"]]}, \"added_tokens\": [{\"id\": 4, "
        "\"content\": \"<|bos|>\", \"special\": true}], " PRE_LLAMA3 ", \"post_processor\": "
        "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|bos|>\", "
        "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]}}";
    write_file("tokenizer.json", good);
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    em_tokenizer *tok;
    em_status err = em_tokenizer_load(dir, &tok); /* the folder means its tokenizer.json */
    CHECK(err == NULL);
    if (err) return;
    CHECK_STR_EQ(em_tokenizer_kind(tok), "gpt2");
    CHECK_INT_EQ(em_tokenizer_bos(tok), 4);
    em_encode_options o = em_tokenizer_default_options(tok);
    CHECK(o.add_bos && !o.add_eos);
    int32_t *ids;
    size_t n;
    o.parse_special = true;
    CHECK(em_tokenizer_encode(tok, "ab<|bos|>cab", 12, o, &ids, &n) == NULL);
    int32_t expected[] = {4, 2, 4, 3, 2}; /* BOS, "ab", <|bos|>, "c", "ab" ("cab" is one word) */
    CHECK(n == 5 && memcmp(ids, expected, sizeof expected) == 0);
    free(ids);
    /* Bytes without a token ("d") are an error naming the offset. */
    o.parse_special = false;
    err = em_tokenizer_encode(tok, "abd", 3, o, &ids, &n);
    CHECK(err != NULL);
    if (err)
        CHECK_STR_EQ(
            err->message,
            "cannot encode byte 0x64 at byte offset 2: the vocabulary has no token for it");
    em_error_free(err);
    em_tokenizer_free(tok);

    /* tokenizer_config.json beside it overrides add_bos and names the EOS. */
    write_file("tokenizer_config.json",
               "{\"add_bos_token\": false, \"add_eos_token\": true, \"eos_token\": {\"content\": "
               "\"c\"}}");
    CHECK(em_tokenizer_load(path, &tok) == NULL);
    o = em_tokenizer_default_options(tok);
    CHECK(!o.add_bos && o.add_eos);
    CHECK_INT_EQ(em_tokenizer_eos(tok), 3);
    em_tokenizer_free(tok);
    write_file("tokenizer_config.json", "{\"bos_token\": \"<nope>\"}");
    CHECK_ERROR(json_error(good),
                "tokenizer_config.json: bos_token '<nope>' is not a token of the vocabulary");

    CHECK_ERROR(json_error("not json"), "tokenizer.json:1:1: invalid JSON");
    CHECK_ERROR(json_error("{\"model\": {\"type\": \"BPE\"}, \"normalizer\": {\"type\": "
                           "\"Lowercase\"}}"),
                "tokenizer.json: a normalizer is not supported (byte-level BPE has none)");
    CHECK_ERROR(json_error("{\"model\": {\"type\": \"BPE\"}, \"normalizer\": {\"type\": "
                           "\"Sequence\", \"normalizers\": [{\"type\": \"Replace\", \"pattern\": "
                           "{\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"}, {\"type\": "
                           "\"NFKC\"}]}}"),
                "tokenizer.json: normalizer 'NFKC' is not supported (SentencePiece-style files: "
                "Prepend \"\xE2\x96\x81\" and Replace \" \" with it)");
    em_status missing = em_tokenizer_load("/nonexistent/tokenizer.json", &tok);
    CHECK(missing != NULL);
    if (missing)
        CHECK_STR_EQ(
            missing->message,
            "/nonexistent/tokenizer.json: cannot open tokenizer: No such file or directory");
    em_error_free(missing);
}

int main(void) {
    snprintf(dir, sizeof dir, "tokenizer_errors_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    fill_byte_tokens();
    test_gguf_errors();
    test_tiny_bpe();
    test_tiny_spm();
    test_spm_no_prefix();
    test_digits();
    test_json();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return test_finish();
}
