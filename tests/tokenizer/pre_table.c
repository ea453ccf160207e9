/* The pre-tokenizer table: every tokenizer.ggml.pre name llama.cpp knows is found, every row's
 * expressions compile, names map to the rows and settings llama.cpp gives them, and the regex
 * engine splits as std::regex does on hand-checked cases (empty lookahead matches, $, {m,n},
 * collapsed categories). With --dump it prints the runnable rows, one line per row: a JSON array
 * of the row label and its expressions, for pre_rows_reference.py. */
#include <stdio.h>
#include <string.h>

#include "stages/tokenizer/pre_table.h"
#include "test.h"

/* The words of text under the named pre-tokenizer, joined by '|'. */
static const char *split(const char *name, const char *text) {
    static char out[1024];
    const em_pre_name *entry = em_pre_find_name(name, strlen(name));
    if (!entry) return "(unknown name)";
    size_t n = 0;
    while (entry->row->exprs[n]) n++;
    em_pretokenizer *pre;
    em_status err = em_pretokenizer_new(entry->row->exprs, n, name, &pre);
    if (err) {
        snprintf(out, sizeof out, "%s", err->message);
        em_error_free(err);
        return out;
    }
    em_pretokenize_buf buf = {0};
    em_pretokenize(pre, text, strlen(text), &buf);
    size_t at = 0, start = 0;
    for (size_t w = 0; w < buf.n_words; w++) {
        at += (size_t)snprintf(out + at, sizeof out - at, "%s%.*s", w ? "|" : "",
                               (int)(buf.words[w] - start), text + start);
        start = buf.words[w];
    }
    out[at] = 0;
    em_pretokenize_buf_free(&buf);
    em_pretokenizer_free(pre);
    return out;
}

static void print_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void dump(void) {
    size_t count;
    const em_pre_name *names = em_pre_names(&count);
    for (size_t i = 0; i < count; i++) {
        const em_pre_row *row = names[i].row;
        bool seen = false;
        for (size_t j = 0; j < i; j++) seen |= names[j].row == row;
        if (seen || names[i].unsupported) continue;
        printf("[");
        print_json_string(row->label);
        for (size_t k = 0; row->exprs[k]; k++) {
            printf(", ");
            print_json_string(row->exprs[k]);
        }
        printf("]\n");
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--dump") == 0) {
        dump();
        return 0;
    }
    size_t count, rows = 0, unsupported = 0, compiled = 0;
    const em_pre_name *names = em_pre_names(&count);
    for (size_t i = 0; i < count; i++) {
        CHECK(em_pre_find_name(names[i].name, strlen(names[i].name)) == &names[i]);
        bool seen = false;
        for (size_t j = 0; j < i; j++) seen |= names[j].row == names[i].row;
        rows += !seen;
        unsupported += names[i].unsupported != NULL;
        if (seen) continue;
        size_t n = 0;
        while (names[i].row->exprs[n]) n++;
        em_pretokenizer *pre;
        em_status err = em_pretokenizer_new(names[i].row->exprs, n, names[i].name, &pre);
        if (err) fprintf(stderr, "%s\n", err->message), em_error_free(err);
        compiled += err == NULL;
        em_pretokenizer_free(pre);
        CHECK(em_pre_find_exprs(names[i].row->exprs, n) == names[i].row);
    }
    printf("%zu names, %zu rows (%zu compiled), %zu names not runnable\n", count, rows, compiled,
           unsupported);
    CHECK(count == 90);
    CHECK(rows == 31);
    CHECK(compiled == rows);
    CHECK(unsupported == 4);

    /* Settings llama.cpp gives some names. */
    const em_pre_name *smollm = em_pre_find_name("smollm", 6);
    const em_pre_name *llama3 = em_pre_find_name("llama-bpe", 9);
    const em_pre_name *glm = em_pre_find_name("chatglm-bpe", 11);
    CHECK(smollm && strcmp(smollm->row->label, "starcoder") == 0 && smollm->settings == 0);
    CHECK(llama3 && llama3->settings == (EM_PRE_IGNORE_MERGES | EM_PRE_ADD_BOS));
    CHECK(glm && glm->row == llama3->row && glm->settings == EM_PRE_NO_BOS);
    CHECK(em_pre_find_name("qwen3", 5) == NULL);
    CHECK_STR_EQ(em_pre_closest_name("qwen3", 5), "qwen2");
    CHECK_STR_EQ(em_pre_closest_name("smollm2", 7), "smollm");

    /* tokenizer.json spellings: Llama 3's case-insensitive contractions, GPT-2 with its \s+,
     * StarCoder's Digits then ByteLevel. */
    const char *hf_llama3[] = {EM_PRE_LLAMA3_HF_EXPR};
    const char *hf_starcoder[] = {"\\p{N}", EM_PRE_GPT2_HF_EXPR};
    CHECK(em_pre_find_hf(hf_llama3, 1) == llama3->row);
    CHECK(em_pre_find_hf(hf_starcoder, 2) == smollm->row);

    /* The engine on hand-checked cases. */
    CHECK_STR_EQ(split("superbpe", "x1234567 12"), "x|1|234|567| |12");
    CHECK_STR_EQ(split("superbpe", "123456"), "123|456"); /* an empty match at 0 */
    CHECK_STR_EQ(split("gpt-2", "Hello  world's 123"), "Hello| | world|'s| 123");
    CHECK_STR_EQ(split("starcoder", "abc 2024!"), "abc| |2|0|2|4|!");
    CHECK_STR_EQ(split("falcon", "a1234+b"), "a|123|4|+|b");
    CHECK_STR_EQ(split("default", "a1234+b"), "a|123|4|+|b");
    CHECK_STR_EQ(split("tiny_aya", "1234567"), "1|234|567");
    CHECK_STR_EQ(split("deepseek-llm", "Hi \xCE\xB1\xCE\xB2  \n12"),
                 "Hi| \xCE\xB1\xCE\xB2|  |\n|12");
    CHECK_STR_EQ(split("qwen2", "I'LL 42\r\n"), "I|'LL| |4|2|\r\n");
    CHECK_STR_EQ(split("chameleon", "<sentinel:7>IMGIMGABZ"), "<|sentinel|:|7|>|IMGIMGABZ");
    CHECK_STR_EQ(split("kimi-k2", "\xE4\xB8\xAD\xE6\x96\x87hello's"),
                 "\xE4\xB8\xAD\xE6\x96\x87|hello's");
    CHECK_STR_EQ(split("afmoe", "ab12345"), "ab|12|345");
    return test_finish();
}
