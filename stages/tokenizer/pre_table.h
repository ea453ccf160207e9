/* The pre-tokenizer table: one row per list of expressions llama.cpp applies (its
 * LLAMA_VOCAB_PRE_TYPE_* regex lists, in src/llama-vocab.cpp), every tokenizer.ggml.pre name it
 * knows mapped to a row with the settings llama.cpp gives that name, and the tokenizer.json
 * spellings of the expressions llama.cpp rewrote. */
#ifndef EVALMESH_TOKENIZER_PRE_TABLE_H
#define EVALMESH_TOKENIZER_PRE_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "stages/tokenizer/pretokenizer.h"

/* The expressions llama.cpp runs with hand-written code (pretokenizer.c), as it spells them. */
#define EM_PRE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define EM_PRE_GPT2_EXPR                                                                           \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* GPT-2's as tokenizer.json spells it (llama.cpp's lacks the final \s+, which its matcher has). */
#define EM_PRE_GPT2_HF_EXPR EM_PRE_GPT2_EXPR "|\\s+"
#define EM_PRE_LLAMA3_TAIL                                                                         \
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                                                 \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!"                                          \
    "\\S)|\\s+"
#define EM_PRE_LLAMA3_EXPR EM_PRE_CONTRACTIONS EM_PRE_LLAMA3_TAIL
#define EM_PRE_LLAMA3_HF_EXPR "(?i:'s|'t|'re|'ve|'m|'ll|'d)" EM_PRE_LLAMA3_TAIL

/* One row: the expressions, applied in order (NULL-terminated). */
typedef struct em_pre_row {
    const char *label; /* llama.cpp's pre-type, lower case */
    const char *exprs[EM_PRE_MAX_EXPRS + 1];
} em_pre_row;

/* What llama.cpp sets for a name besides its expressions. */
enum {
    EM_PRE_IGNORE_MERGES = 1, /* a word that is itself a token is not merged */
    EM_PRE_ADD_BOS = 2,       /* BOS by default (GGUF add_bos_token still decides) */
    EM_PRE_NO_BOS = 4,        /* no BOS token by default (GGUF bos_token_id still decides) */
};

typedef struct em_pre_name {
    const char *name; /* tokenizer.ggml.pre */
    const em_pre_row *row;
    unsigned settings;
    /* Non-NULL when evalmesh knows the name but cannot run it: why. */
    const char *unsupported;
} em_pre_name;

/* The entry of tokenizer.ggml.pre name[0..len), or NULL. */
const em_pre_name *em_pre_find_name(const char *name, size_t len);
/* The known name closest to name[0..len) (edit distance), for error messages. */
const char *em_pre_closest_name(const char *name, size_t len);
/* The row applying exactly exprs[0..n) in that order, or NULL. */
const em_pre_row *em_pre_find_exprs(const char *const *exprs, size_t n);
/* The row applying the tokenizer.json patterns[0..n) in that order, or NULL. A pattern matches
 * llama.cpp's expression when they are equal once its case-insensitive contractions
 * "(?i:'s|...)" read "(?:'[sS]|...)"; failing that, the patterns llama.cpp rewrote by hand
 * (GPT-2's without its final "|\s+", Tekken's and GPT-4o's letter classes) are tried in their
 * rewritten form. */
const em_pre_row *em_pre_find_hf(const char *const *patterns, size_t n);
/* The row of tokenizer.ggml.pre "default" (also used when the key is absent). */
const em_pre_row *em_pre_default_row(void);

/* Every name, for tests: *count entries. */
const em_pre_name *em_pre_names(size_t *count);

#endif
