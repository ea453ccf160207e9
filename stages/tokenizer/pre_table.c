/* The pre-tokenizer table (see pre_table.h). Rows follow llama.cpp's src/llama-vocab.cpp: the
 * expressions are its strings, so the hand-written matchers and the collapsed-category regex
 * engine see exactly what llama.cpp's unicode_regex_split sees. Non-ASCII characters are written
 * as \u escapes so that no editor can normalize them (a range like U+1F5F-U+1F7D must not become
 * U+1F5F-U+03CE). */
#include "stages/tokenizer/pre_table.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/edit_distance.h"
#include "util/error.h"

#define C EM_PRE_CONTRACTIONS
#define GPT2 EM_PRE_GPT2_EXPR
/* Shared tails of the Qwen2-style expressions. */
#define WORD_TAIL "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2 C "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" WORD_TAIL
/* Words of an upper-case run then lower case, or the other way round (Tekken, GPT-4o). */
#define CASED_WORDS(LETTER, SUFFIX)                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[" LETTER "])([^a-z]))*((?=[" LETTER "])([^A-Z]))+" SUFFIX          \
    "|[^\\r\\n\\p{L}\\p{N}]?((?=[" LETTER "])([^a-z]))+((?=[" LETTER "])([^A-Z]))*" SUFFIX
#define UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define CASED_CLASSES(SUFFIX)                                                                      \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" SUFFIX "|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER  \
    "*" SUFFIX
#define CASED_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*" WORD_TAIL
#define ASCII_PUNCT_WORD "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
#define CJK_KANA_3040 "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"
/* deepseek-llm's letters: cased letters of many scripts */
#define DS_LETTERS                                                                                 \
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-"    \
    "\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-"           \
    "\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-"  \
    "\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-"  \
    "\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-"          \
    "\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-"         \
    "\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-"                       \
    "\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-"                 \
    "\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-"           \
    "\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-"  \
    "\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-"        \
    "\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-"         \
    "\U0001E943]+"
#define DS_PUNCT "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"
#define DS_CJK "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
#define YOUTU_CJK                                                                                  \
    "[\uAC00-\uD7A3\u3131-\u318E]+|["                                                              \
    "\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B\uFF0C\u3001-\u303F\uFE30-\uFE4F]+|["   \
    "\u3105-\u312F]+|[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"
#define AFMOE_CJK                                                                                  \
    "[\u4E00-\u9FFF\u3400-\u4DBF\uF900-\uFAFF\u3040-\u309F\u30A0-\u30FF\uFF65-\uFF9F\u2F00-"       \
    "\u2FDF\u0E40-\u0E7F\u0E80-\u0EFF\u1780-\u17FF\u1000-\u109F\uAA60-\uAA7F\uA9E0-\uA9FF\uAC00-"  \
    "\uD7AF\u1100-\u11FF]+"
#define PORO " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"

enum {
    R_DEFAULT,
    R_LLAMA3,
    R_JAIS2,
    R_DEEPSEEK_LLM,
    R_DEEPSEEK3,
    R_SPARK2_5,
    R_YOUTU,
    R_DEEPSEEK_CODER,
    R_FALCON,
    R_STARCODER,
    R_GPT2,
    R_QWEN2,
    R_QWEN35,
    R_PORO,
    R_VIKING,
    R_TEKKEN,
    R_CHAMELEON,
    R_GPT4O,
    R_GRANITE_EMB,
    R_TINY_AYA,
    R_KIMI_K2,
    R_SUPERBPE,
    R_BAILINGMOE,
    R_SEED_CODER,
    R_UFAKZEKA,
    R_AFMOE,
    R_LAGUNA,
    R_EXAONE_MOE,
    R_GEMMA4,
    R_MINICPM5,
    R_WHITESPACE,
    N_ROWS
};

static const em_pre_row ROWS[N_ROWS] = {
    [R_DEFAULT] = {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    [R_LLAMA3] = {"llama3", {EM_PRE_LLAMA3_EXPR}},
    [R_JAIS2] = {"jais2",
                 {C "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"
                    "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|"
                    "\\s{1}"}},
    [R_DEEPSEEK_LLM] = {"deepseek-llm",
                        {"[\r\n]", DS_LETTERS, DS_PUNCT, "\\s+$", DS_CJK, "\\p{N}+"}},
    [R_DEEPSEEK3] = {"deepseek3-llm",
                     {"\\p{N}{1,3}", CJK_KANA_3040,
                      ASCII_PUNCT_WORD
                      "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+"
                      "[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    [R_SPARK2_5] = {"spark2_5",
                    {"\\p{N}{1,3}", CJK_KANA_3040,
                     ASCII_PUNCT_WORD
                     "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|"
                     "[\r\n]|\\s+(?!\\S)|\\s+",
                     "\\p{N}"}},
    [R_YOUTU] = {"youtu", {YOUTU_CJK, CASED_CLASSES(C "?") "|\\p{N}" CASED_TAIL}},
    [R_DEEPSEEK_CODER] = {"deepseek-coder",
                          {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", DS_CJK, "\\p{N}"}},
    [R_FALCON] = {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"}},
    [R_STARCODER] = {"starcoder", {"\\p{N}", GPT2}},
    [R_GPT2] = {"gpt2", {GPT2}},
    [R_QWEN2] = {"qwen2", {QWEN2}},
    [R_QWEN35] = {"qwen35",
                  {C "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
                     "[\\r\\n]*" WORD_TAIL}},
    [R_PORO] = {"poro", {PORO}},
    [R_VIKING] = {"viking", {PORO, "\\p{N}"}},
    [R_TEKKEN] = {"tekken", {CASED_WORDS("\\p{L}", "") "|\\p{N}" CASED_TAIL}},
    [R_CHAMELEON] = {"chameleon",
                     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                      "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", GPT2}},
    [R_GPT4O] = {"gpt4o", {CASED_WORDS("\\p{L}", C "?") "|\\p{N}{1,3}" CASED_TAIL}},
    [R_GRANITE_EMB] = {"granite-emb-multi",
                       {CASED_WORDS("\\p{L}\\p{M}", C "?") "|\\p{N}{1,3}" CASED_TAIL}},
    [R_TINY_AYA] = {"tiny-aya",
                    {"\\d{1,3}(?=(?:\\d{3})*\\b)", CASED_CLASSES(C "?") "|\\p{N}{1,3}" CASED_TAIL}},
    [R_KIMI_K2] = {"kimi-k2", {"\\p{Han}+"}},
    [R_SUPERBPE] = {"superbpe", {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}},
    [R_BAILINGMOE] = {"bailingmoe",
                      {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                       "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    [R_SEED_CODER] =
        {"seed-coder",
         {C "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+" WORD_TAIL}},
    [R_UFAKZEKA] =
        {"ufakzeka",
         {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" WORD_TAIL}},
    [R_AFMOE] = {"afmoe",
                 {"\\p{AFMoE_digits}", AFMOE_CJK,
                  ASCII_PUNCT_WORD "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+"
                                   "[\\r\\n]*" WORD_TAIL}},
    [R_LAGUNA] = {"laguna", {"[^\\n]+|[\\n]+", QWEN2}},
    [R_EXAONE_MOE] = {"exaone-moe",
                      {C "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| "
                         "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    [R_GEMMA4] = {"gemma4", {"[^\\n]+|[\\n]+"}},
    [R_MINICPM5] =
        {"minicpm5",
         {"\\p{N}{1,3}",
          C "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" WORD_TAIL}},
    [R_WHITESPACE] = {"whitespace", {"\\S+"}},
};

enum { IM = EM_PRE_IGNORE_MERGES, BOS = EM_PRE_ADD_BOS, NO_BOS = EM_PRE_NO_BOS };
#define RAW_UTF8                                                                                   \
    "it is BPE over raw UTF-8 with \"\u2581\" for spaces, not byte-level BPE, which evalmesh "     \
    "does not run yet"

static const em_pre_name NAMES[] = {
    {"default", &ROWS[R_DEFAULT], 0, NULL},
    {"llama3", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"llama-v3", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"llama-bpe", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"falcon3", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"falcon-h1", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"pixtral", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"midm-2.0", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"lfm2", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"jina-v5-nano", &ROWS[R_LLAMA3], IM | BOS, NULL},
    {"dbrx", &ROWS[R_LLAMA3], 0, NULL},
    {"smaug-bpe", &ROWS[R_LLAMA3], 0, NULL},
    {"glm4", &ROWS[R_LLAMA3], NO_BOS, NULL},
    {"chatglm-bpe", &ROWS[R_LLAMA3], NO_BOS, NULL},
    {"jais-2", &ROWS[R_JAIS2], 0, NULL},
    {"deepseek-llm", &ROWS[R_DEEPSEEK_LLM], 0, NULL},
    {"deepseek-v3", &ROWS[R_DEEPSEEK3], 0, NULL},
    {"hunyuan-dense", &ROWS[R_DEEPSEEK3], 0, NULL},
    {"joyai-llm", &ROWS[R_DEEPSEEK3], 0, NULL},
    {"hy_v4", &ROWS[R_DEEPSEEK3], 0, NULL},
    {"spark2_5", &ROWS[R_SPARK2_5], 0, NULL},
    {"youtu", &ROWS[R_YOUTU], IM, NULL},
    {"deepseek-coder", &ROWS[R_DEEPSEEK_CODER], 0, NULL},
    {"falcon", &ROWS[R_FALCON], 0, NULL},
    {"starcoder", &ROWS[R_STARCODER], 0, NULL},
    {"refact", &ROWS[R_STARCODER], 0, NULL},
    {"command-r", &ROWS[R_STARCODER], 0, NULL},
    {"smollm", &ROWS[R_STARCODER], 0, NULL},
    {"codeshell", &ROWS[R_STARCODER], 0, NULL},
    {"exaone", &ROWS[R_STARCODER], 0, NULL},
    {"minerva-7b", &ROWS[R_STARCODER], 0, NULL},
    {"mellum2", &ROWS[R_STARCODER], 0, NULL},
    {"gpt-2", &ROWS[R_GPT2], 0, NULL},
    {"phi-2", &ROWS[R_GPT2], 0, NULL},
    {"jina-es", &ROWS[R_GPT2], 0, NULL},
    {"jina-de", &ROWS[R_GPT2], 0, NULL},
    {"gigachat", &ROWS[R_GPT2], 0, NULL},
    {"jina-v2-es", &ROWS[R_GPT2], 0, NULL},
    {"jina-v2-de", &ROWS[R_GPT2], 0, NULL},
    {"a.x-4.0", &ROWS[R_GPT2], 0, NULL},
    {"mellum", &ROWS[R_GPT2], 0, NULL},
    {"modern-bert", &ROWS[R_GPT2], 0, NULL},
    {"jina-v1-en", &ROWS[R_GPT2], 0, NULL},
    {"jina-v2-code", &ROWS[R_GPT2], 0, NULL},
    {"roberta-bpe", &ROWS[R_GPT2], 0, NULL},
    {"exaone4", &ROWS[R_GPT2], 0, NULL},
    {"mpt", &ROWS[R_GPT2], 0, NULL},
    {"olmo", &ROWS[R_GPT2], 0, NULL},
    {"jais", &ROWS[R_GPT2], 0, NULL},
    {"trillion", &ROWS[R_GPT2], 0, NULL},
    {"granite-docling", &ROWS[R_GPT2], 0, NULL},
    {"qwen2", &ROWS[R_QWEN2], 0, NULL},
    {"deepseek-r1-qwen", &ROWS[R_QWEN2], 0, NULL},
    {"kormo", &ROWS[R_QWEN2], 0, NULL},
    {"f2llmv2", &ROWS[R_QWEN2], 0, NULL},
    {"megrez", &ROWS[R_QWEN2], 0, NULL},
    {"stablelm2", &ROWS[R_QWEN2], 0, NULL},
    {"hunyuan", &ROWS[R_QWEN2], 0, NULL},
    {"solar-open", &ROWS[R_QWEN2], 0, NULL},
    {"grok-2", &ROWS[R_QWEN2], 0, NULL},
    {"qwen35", &ROWS[R_QWEN35], 0, NULL},
    {"poro-chat", &ROWS[R_PORO], 0, NULL},
    {"bloom", &ROWS[R_PORO], 0, NULL},
    {"gpt3-finnish", &ROWS[R_PORO], 0, NULL},
    {"viking", &ROWS[R_VIKING], 0, NULL},
    {"tekken", &ROWS[R_TEKKEN], IM | BOS, NULL},
    {"chameleon", &ROWS[R_CHAMELEON], BOS, NULL},
    {"gpt-4o", &ROWS[R_GPT4O], 0, NULL},
    {"llama4", &ROWS[R_GPT4O], 0, NULL},
    {"kanana2", &ROWS[R_GPT4O], 0, NULL},
    {"talkie", &ROWS[R_GPT4O], 0, NULL},
    {"minimax-m2", &ROWS[R_GPT4O], 0, NULL},
    {"granite-embed-multi-97m", &ROWS[R_GRANITE_EMB], IM, NULL},
    {"tiny_aya", &ROWS[R_TINY_AYA], 0, NULL},
    {"cohere2moe", &ROWS[R_TINY_AYA], 0, NULL},
    {"kimi-k2", &ROWS[R_KIMI_K2], 0, NULL},
    {"superbpe", &ROWS[R_SUPERBPE], 0, NULL},
    {"bailingmoe", &ROWS[R_BAILINGMOE], 0, NULL},
    {"bailingmoe2", &ROWS[R_BAILINGMOE], 0, NULL},
    {"llada-moe", &ROWS[R_BAILINGMOE], 0, NULL},
    {"seed-coder", &ROWS[R_SEED_CODER], 0, NULL},
    {"ufakzeka", &ROWS[R_UFAKZEKA], 0, NULL},
    {"afmoe", &ROWS[R_AFMOE], 0, NULL},
    {"laguna", &ROWS[R_LAGUNA], 0, NULL},
    {"exaone-moe", &ROWS[R_EXAONE_MOE], 0, NULL},
    {"minicpm5", &ROWS[R_MINICPM5], IM, NULL},
    {"gemma4", &ROWS[R_GEMMA4], 0, RAW_UTF8},
    {"granite-embed-multi-311m", &ROWS[R_GEMMA4], 0, RAW_UTF8},
    {"sarvam-moe", &ROWS[R_GEMMA4], 0, RAW_UTF8},
    {"whitespace", &ROWS[R_WHITESPACE], 0,
     "it drops whitespace and runs BPE over raw UTF-8 (tokenizer.ggml.model \"whitespace\"), "
     "which evalmesh does not run yet"},
};
#define N_NAMES (sizeof(NAMES) / sizeof(NAMES[0]))

const em_pre_name *em_pre_names(size_t *count) {
    *count = N_NAMES;
    return NAMES;
}

const em_pre_row *em_pre_default_row(void) {
    return &ROWS[R_DEFAULT];
}

const em_pre_name *em_pre_find_name(const char *name, size_t len) {
    for (size_t i = 0; i < N_NAMES; i++)
        if (strlen(NAMES[i].name) == len && memcmp(NAMES[i].name, name, len) == 0) return &NAMES[i];
    return NULL;
}

const char *em_pre_closest_name(const char *name, size_t len) {
    const char *best = NAMES[0].name;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < N_NAMES; i++) {
        size_t d = em_edit_distance(name, len, NAMES[i].name, strlen(NAMES[i].name), SIZE_MAX);
        if (d < best_d) best_d = d, best = NAMES[i].name;
    }
    return best;
}

const em_pre_row *em_pre_find_exprs(const char *const *exprs, size_t n) {
    for (size_t r = 0; r < N_ROWS; r++) {
        size_t k = 0;
        while (k < n && ROWS[r].exprs[k] && strcmp(ROWS[r].exprs[k], exprs[k]) == 0) k++;
        if (k == n && !ROWS[r].exprs[n]) return &ROWS[r];
    }
    return NULL;
}

/* tokenizer.json spellings of the expressions llama.cpp rewrote by hand. */
static const struct {
    const char *hf, *expr;
} HF_SPELLINGS[] = {
    {EM_PRE_GPT2_HF_EXPR, GPT2},
    {CASED_CLASSES("") "|\\p{N}" CASED_TAIL, CASED_WORDS("\\p{L}", "") "|\\p{N}" CASED_TAIL},
    {CASED_CLASSES(C "?") "|\\p{N}{1,3}" CASED_TAIL,
     CASED_WORDS("\\p{L}", C "?") "|\\p{N}{1,3}" CASED_TAIL},
};

/* pattern with each "(?i:'s|...)" spelled llama.cpp's way (malloc'd). */
static char *case_free(const char *pattern) {
    static const char ICASE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
    char *expr = em_xasprintf("%s", pattern);
    char *at;
    while ((at = strstr(expr, ICASE)) != NULL) {
        char *next = em_xasprintf("%.*s%s%s", (int)(at - expr), expr, C, at + sizeof(ICASE) - 1);
        free(expr);
        expr = next;
    }
    return expr;
}

const em_pre_row *em_pre_find_hf(const char *const *patterns, size_t n) {
    if (n > EM_PRE_MAX_EXPRS) return NULL;
    char *exprs[EM_PRE_MAX_EXPRS] = {0};
    for (size_t k = 0; k < n; k++) exprs[k] = case_free(patterns[k]);
    const em_pre_row *row = em_pre_find_exprs((const char *const *)exprs, n);
    /* Then with the hand-written rewrites (a pattern may be a row's own spelling too). */
    for (size_t k = 0; k < n && !row; k++)
        for (size_t i = 0; i < sizeof(HF_SPELLINGS) / sizeof(HF_SPELLINGS[0]); i++)
            if (strcmp(exprs[k], HF_SPELLINGS[i].hf) == 0) {
                free(exprs[k]);
                exprs[k] = em_xasprintf("%s", HF_SPELLINGS[i].expr);
                break;
            }
    if (!row) row = em_pre_find_exprs((const char *const *)exprs, n);
    for (size_t k = 0; k < n; k++) free(exprs[k]);
    return row;
}
