/* libFuzzer target for SentencePiece BPE: arbitrary bytes are encoded with two small in-memory
 * vocabularies (byte tokens <0xNN>, a few scored pieces, <unk>/<s>/</s>; the second also has a
 * piece "x▁y" spanning a word start, which makes the tokenizer merge whole texts instead of word
 * by word) and decoded back. Invalid UTF-8 must be an exit-status-2 error naming a byte offset
 * inside the text; valid text must come back byte for byte unless it holds a literal "▁" or
 * special tokens are parsed (the documented exceptions). The first input byte picks the options. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_tokenizer.h"

static em_tokenizer *tokenizers[2];

static em_tokenizer *build(int n_extra) {
    static char bytes[256][7];
    static const char *pieces[] = {"\xE2\x96\x81",
                                   "a",
                                   "b",
                                   "\xE2\x96\x81"
                                   "a",
                                   "ab",
                                   "\xE2\x96\x81"
                                   "ab",
                                   "\xE2\x96\x81\xE2\x96\x81",
                                   "x",
                                   "y",
                                   "x\xE2\x96\x81y"};
    static const float piece_scores[] = {-1, -2, -3, -1.5f, -2.5f, -0.5f, -4, -5, -6, -0.1f};
    const char *tokens[3 + 256 + 10];
    float scores[3 + 256 + 10] = {0};
    int32_t types[3 + 256 + 10];
    tokens[0] = "<unk>", tokens[1] = "<s>", tokens[2] = "</s>";
    types[0] = 2, types[1] = types[2] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tokens[3 + b] = bytes[b];
        types[3 + b] = 6;
    }
    int n = 3 + 256 + 9 + n_extra;
    for (int i = 259; i < n; i++) {
        tokens[i] = pieces[i - 259];
        scores[i] = piece_scores[i - 259];
        types[i] = 1;
    }
    tiny_gguf g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "llama");
    tg_kv_strings(&g, "tokenizer.ggml.tokens", tokens, (size_t)n);
    tg_kv_f32s(&g, "tokenizer.ggml.scores", scores, (size_t)n);
    tg_kv_i32s(&g, "tokenizer.ggml.token_type", types, (size_t)n);
    return fuzz_tokenizer_from(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tokenizers[0]) tokenizers[0] = build(0), tokenizers[1] = build(1);
    if (size == 0) return 0;
    em_tokenizer *tok = tokenizers[data[0] & 1];
    em_encode_options o = {
        .add_bos = data[0] & 2, .add_eos = data[0] & 8, .parse_special = data[0] & 4};
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *back;
    size_t back_len;
    if (!fuzz_encode_decode(tok, text, len, o, &back, &back_len)) return 0; /* bad UTF-8 */
    int literal_mark = memmem(text, len, "\xE2\x96\x81", 3) != NULL;
    if (!o.parse_special && !literal_mark && (back_len != len || memcmp(back, text, len) != 0))
        abort();
    free(back);
    return 0;
}
