/* libFuzzer target for byte-level BPE: arbitrary bytes are encoded with small in-memory
 * tokenizers (eight pre-tokenizers: GPT-2's and Llama 3's hand-written ones and six run by the
 * regex engine; all 256 byte tokens, a few merges, a control token) and decoded back. Invalid UTF-8
 * must be an exit-status-2 error naming a byte offset inside the text; valid text must come back
 * byte for byte when special tokens are not parsed. The first input byte picks the options. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_tokenizer.h"

/* Pre-tokenizers covering the regex engine's features: lookahead (empty matches in superbpe),
 * $, {m,n}, lazy-free backtracking over collapsed categories, non-ASCII classes. */
static const char *const PRE[8] = {"gpt-2",  "llama3",   "starcoder", "deepseek-llm",
                                   "tekken", "superbpe", "jais-2",    "exaone-moe"};
static em_tokenizer *tokenizers[8];

static em_tokenizer *build(const char *pre) {
    static char texts[256][3];
    const char *tokens[262];
    tg_byte_tokens(texts, tokens);
    tokens[256] = "\xC4\xA0t"; /* "Ġt" */
    tokens[257] = "he";
    tokens[258] = "\xC4\xA0the";
    tokens[259] = "in";
    tokens[260] = "\xC4\xA0\xC4\xA0"; /* two spaces */
    tokens[261] = "<|s|>";
    static const char *merges[] = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC4\xA0 \xC4\xA0"};
    int32_t types[262];
    for (int i = 0; i < 262; i++) types[i] = i == 261 ? 3 : 1;
    tiny_gguf g = tg_begin();
    tg_kv_string(&g, "tokenizer.ggml.model", "gpt2");
    tg_kv_string(&g, "tokenizer.ggml.pre", pre);
    tg_kv_strings(&g, "tokenizer.ggml.tokens", tokens, 262);
    tg_kv_i32s(&g, "tokenizer.ggml.token_type", types, 262);
    tg_kv_strings(&g, "tokenizer.ggml.merges", merges, 5);
    tg_kv_u32(&g, "tokenizer.ggml.bos_token_id", 261);
    return fuzz_tokenizer_from(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tokenizers[0])
        for (int i = 0; i < 8; i++) tokenizers[i] = build(PRE[i]);
    if (size == 0) return 0;
    em_tokenizer *tok = tokenizers[(data[0] & 1) | ((data[0] >> 4) & 6)]; /* bits 0, 5, 6 */
    em_encode_options o = {.add_bos = data[0] & 2, .parse_special = data[0] & 4};
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *back;
    size_t back_len;
    if (!fuzz_encode_decode(tok, text, len, o, &back, &back_len)) return 0; /* bad UTF-8 */
    if (!o.parse_special && (back_len != len || memcmp(back, text, len) != 0)) abort();
    free(back);
    return 0;
}
