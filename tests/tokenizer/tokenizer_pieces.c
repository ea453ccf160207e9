/* em_tokenizer_encode_pieces gives exactly em_tokenizer_encode's ids, on every tokenizer of the
 * shared data (SentencePiece: Llama 2, stories260K; byte-level BPE: GPT-2, StarCoder, Falcon,
 * DeepSeek Coder, Llama 3's tokenizer.json): on the WikiText-2 test text and on adversarial text
 * (long runs without whitespace, long runs of spaces, multi-byte UTF-8 and special tokens beside
 * every cut point), with pieces from 1 byte (a cut at every point allowed) to 64 KiB; and a sink
 * that asks for no more gets a prefix of those ids. The same for every pre-tokenizer name of
 * pre_table.h, on a byte-level vocabulary whose merges join a letter with a following space (so a
 * cut inside a word that holds spaces changes the ids). */
#include <stdint.h>

#include "shared_data.h"
#include "stages/tokenizer/pre_table.h"
#include "stages/tokenizer/tokenizer.h"
#include "tiny_gguf.h"

typedef struct collected {
    int32_t *ids;
    size_t count, cap;
    size_t pieces;
    size_t stop_after; /* ask for no more once this many ids came (0: never) */
} collected;

static void collect(void *context, const int32_t *ids, size_t n, bool *enough) {
    collected *c = context;
    if (c->count + n > c->cap) {
        c->cap = 2 * (c->count + n);
        c->ids = realloc(c->ids, c->cap * sizeof *c->ids);
    }
    memcpy(c->ids + c->count, ids, n * sizeof *ids);
    c->count += n;
    c->pieces++;
    if (c->stop_after && c->count >= c->stop_after) *enough = true;
}

/* Encodes text whole and in pieces of each size; the ids must be the same. Returns the number of
 * pieces the smallest size gave (to show that cuts happened). */
static size_t check_same(const char *name, const em_tokenizer *tok, const char *label,
                         const char *text, size_t len, em_encode_options o) {
    int32_t *whole;
    size_t n_whole;
    em_status err = em_tokenizer_encode(tok, text, len, o, &whole, &n_whole);
    if (err) {
        fprintf(stderr, "%s, %s: %s\n", name, label, err->message);
        CHECK(err == NULL);
        em_error_free(err);
        return 0;
    }
    static const size_t sizes[] = {65536, 4096, 97, 7, 1};
    size_t smallest_pieces = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        collected c = {0};
        err = em_tokenizer_encode_pieces(tok, text, len, o, sizes[k], collect, &c);
        CHECK(err == NULL);
        em_error_free(err);
        size_t diff = 0;
        while (diff < c.count && diff < n_whole && c.ids[diff] == whole[diff]) diff++;
        if (c.count != n_whole || diff != n_whole)
            fprintf(
                stderr,
                "%s, %s, pieces of %zu bytes: %zu ids (whole: %zu), first difference at id %zu\n",
                name, label, sizes[k], c.count, n_whole, diff);
        CHECK_INT_EQ(c.count, n_whole);
        CHECK_INT_EQ(diff, n_whole);
        smallest_pieces = c.pieces;
        free(c.ids);
    }
    /* Stopping: a prefix of the ids, at least as many as asked for. */
    if (n_whole > 10) {
        collected c = {.stop_after = n_whole / 3};
        err = em_tokenizer_encode_pieces(tok, text, len, o, 7, collect, &c);
        CHECK(err == NULL);
        em_error_free(err);
        CHECK(c.count >= n_whole / 3 && c.count <= n_whole);
        CHECK(memcmp(c.ids, whole, c.count * sizeof *whole) == 0);
        free(c.ids);
    }
    free(whole);
    return smallest_pieces;
}

/* Text made to sit on the edges of pieces: every kind of character beside "letter space letter". */
static char *adversarial(size_t *len) {
    static const char *parts[] = {
        "Hello world, it's a test of cuts. ",
        "don't we'll they've I'm he'd  a b c d e f g h ",
        "caf\xC3\xA9 na\xC3\xAFve \xC3\xA9t\xC3\xA9 a\xC3\xA9 b\xC3\xA9 \xC3\xA9"
        "a \xC3\xA9"
        "b ",
        "\xE6\x97\xA5\xE6\x9C\xAC a \xE8\xAA\x9E b \xF0\x9F\x98\x80"
        "x y\xF0\x9F\x98\x80 z ",
        "12345 678 9a b0 x1 1x a1 b ",
        "x\ty a\nb a\r\nb a\n\nb a  b a   b a \tb ",
        "<s> a</s>b <|endoftext|>c d <|begin_of_text|> e <unk>f g ",
        "A B C Word Word WORD word.Word word's Word's x ",
        "\xE2\x96\x81 a\xE2\x96\x81 b \xE2\x96\x81\xE2\x96\x81"
        "c d ",
    };
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
            size_t m = strlen(parts[i]);
            memcpy(text + n, parts[i], m);
            n += m;
        }
    /* a run of 3000 letters, then 2000 spaces, then letters and spaces again */
    for (int i = 0; i < 3000; i++) text[n++] = (char)('a' + i % 26);
    for (int i = 0; i < 2000; i++) text[n++] = ' ';
    for (int i = 0; i < 400; i++) text[n++] = i % 3 == 2 ? ' ' : (char)('a' + i % 7);
    for (int i = 0; i < 1000; i++) {
        memcpy(text + n, "\xC3\xA9", 2);
        n += 2;
    }
    memcpy(text + n, " end", 4);
    n += 4;
    *len = n;
    return text;
}

/* For each pre-tokenizer name: a byte-level vocabulary of the 256 bytes and "LĠ" for each ASCII
 * letter L (merges "L Ġ"), as a GGUF file in dir; encoding in pieces must give the whole ids. */
static void check_pre_rows(const char *text, size_t len) {
    static char byte_texts[256][3];
    static char joined[52][4];
    static char merge_texts[52][5];
    const char *tokens[256 + 52], *merges[52];
    tg_byte_tokens(byte_texts, tokens);
    for (int i = 0; i < 52; i++) {
        char l = (char)(i < 26 ? 'a' + i : 'A' + i - 26);
        snprintf(joined[i], sizeof joined[i], "%c\xC4\xA0", l);
        snprintf(merge_texts[i], sizeof merge_texts[i], "%c \xC4\xA0", l);
        tokens[256 + i] = joined[i];
        merges[i] = merge_texts[i];
    }
    char dir[] = "/tmp/em_pieces_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/vocab.gguf", dir);
    size_t n_names, rows = 0;
    const em_pre_name *names = em_pre_names(&n_names);
    for (size_t k = 0; k < n_names; k++) {
        if (names[k].unsupported) continue;
        tiny_gguf g = tg_begin();
        tg_kv_string(&g, "tokenizer.ggml.model", "gpt2");
        tg_kv_string(&g, "tokenizer.ggml.pre", names[k].name);
        tg_kv_strings(&g, "tokenizer.ggml.tokens", tokens, 256 + 52);
        tg_kv_strings(&g, "tokenizer.ggml.merges", merges, 52);
        FILE *f = fopen(path, "wb");
        fwrite(g.data, 1, g.len, f);
        fclose(f);
        free(g.data);
        em_tokenizer *tok;
        em_status err = em_tokenizer_load(path, &tok);
        if (err) fprintf(stderr, "pre '%s': %s\n", names[k].name, err->message);
        CHECK(err == NULL);
        em_error_free(err);
        if (err) continue;
        em_encode_options o = em_tokenizer_default_options(tok);
        o.add_bos = false;
        check_same(names[k].name, tok, "byte-level vocabulary", text, len, o);
        em_tokenizer_free(tok);
        rows++;
    }
    CHECK(rows > 50);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    static const char *tokenizers[] = {
        "tokenizers/llama-spm/ggml-vocab-llama-spm.gguf",
        "models/stories260K.gguf",
        "tokenizers/gpt-2/ggml-vocab-gpt-2.gguf",
        "tokenizers/starcoder/ggml-vocab-starcoder.gguf",
        "tokenizers/falcon/ggml-vocab-falcon.gguf",
        "tokenizers/deepseek-coder/ggml-vocab-deepseek-coder.gguf",
        "tokenizers/llama3/tokenizer.json",
    };
    char *wiki_path = shared_path("text/wikitext-2-raw-v1.test.txt");
    size_t wiki_len;
    char *wiki = read_whole(wiki_path, &wiki_len);
    CHECK(wiki != NULL);
    if (!wiki) return test_finish();
    /* the first 256 KiB, ending before a UTF-8 continuation byte */
    size_t part = wiki_len < 262144 ? wiki_len : 262144;
    while (part < wiki_len && ((unsigned char)wiki[part] & 0xC0) == 0x80) part++;
    size_t adv_len;
    char *adv = adversarial(&adv_len);
    for (size_t t = 0; t < sizeof tokenizers / sizeof *tokenizers; t++) {
        char *path = shared_path(tokenizers[t]);
        em_tokenizer *tok;
        em_status err = em_tokenizer_load(path, &tok);
        CHECK(err == NULL);
        if (err) {
            em_error_free(err);
            free(path);
            continue;
        }
        em_encode_options o = em_tokenizer_default_options(tok);
        size_t cuts = check_same(tokenizers[t], tok, "WikiText-2 (256 KiB)", wiki, part, o);
        CHECK(cuts > 1000); /* the text really was cut */
        check_same(tokenizers[t], tok, "adversarial", adv, adv_len, o);
        o.parse_special = true;
        o.add_eos = em_tokenizer_eos(tok) >= 0;
        check_same(tokenizers[t], tok, "adversarial, parse_special, EOS", adv, adv_len, o);
        em_tokenizer_free(tok);
        free(path);
    }
    /* The whole WikiText-2 test text in 1 MiB pieces (as the dataset stage reads), on the two
     * families. */
    for (size_t t = 0; t < 3; t += 2) {
        char *path = shared_path(tokenizers[t]);
        em_tokenizer *tok;
        em_status err = em_tokenizer_load(path, &tok);
        CHECK(err == NULL);
        if (!err) {
            int32_t *whole;
            size_t n_whole;
            em_encode_options o = em_tokenizer_default_options(tok);
            CHECK(em_tokenizer_encode(tok, wiki, wiki_len, o, &whole, &n_whole) == NULL);
            collected c = {0};
            CHECK(em_tokenizer_encode_pieces(tok, wiki, wiki_len, o, 1 << 20, collect, &c) == NULL);
            CHECK_INT_EQ(c.count, n_whole);
            CHECK(c.count == n_whole && memcmp(c.ids, whole, n_whole * sizeof *whole) == 0);
            CHECK_INT_EQ(c.pieces, 2);
            free(c.ids);
            free(whole);
            em_tokenizer_free(tok);
        }
        em_error_free(err);
        free(path);
    }
    /* every pre-tokenizer on 16 KiB of WikiText-2 and the adversarial text */
    size_t mixed_len = 16384 + adv_len;
    char *mixed = malloc(mixed_len);
    memcpy(mixed, wiki, 16384);
    memcpy(mixed + 16384, adv, adv_len);
    check_pre_rows(mixed, mixed_len);
    free(mixed);
    free(adv);
    free(wiki);
    free(wiki_path);
    return test_finish();
}
