/* What the tokenizer files share inside stages/tokenizer: the em_tokenizer struct, the growable id
 * list, and the entry points of each family (spm.c, bpe.c: the rows of tokenizer_family.h) and
 * of the loaders. Not for use
 * outside this folder: the public API is tokenizer.h. */
#ifndef EVALMESH_TOKENIZER_IMPL_H
#define EVALMESH_TOKENIZER_IMPL_H

#include "stages/tokenizer/bpe_merges.h"
#include "stages/tokenizer/pre_table.h"
#include "stages/tokenizer/pretokenizer.h"
#include "stages/tokenizer/tokenizer.h"
#include "stages/tokenizer/tokenizer_family.h"
#include "stages/tokenizer/vocab.h"

struct em_tokenizer {
    const em_tokenizer_family *family; /* a row of tokenizer_family.h */
    em_vocab vocab;
    int32_t bos, eos, unk; /* -1 when there is none */
    bool add_bos, add_eos;
    bool add_space_prefix; /* SPM: "▁" before the text and after each special token */
    /* SPM: no token has "▁" right after another character, so no merge crosses the start of a
     * word ("▁" after a non-"▁"): words can be merged one by one, and cached. */
    bool spm_by_word;
    /* SPM: the token <0xNN> of each byte (-1 when absent). BPE: the token of the byte's
     * byte-to-unicode character (-1 when absent). */
    int32_t byte_tokens[256];
    /* BPE only */
    em_pretokenizer *pre; /* compiled from a row of pre_table.h */
    /* pre ends a word before a space between two ASCII letters (em_tokenizer_next_cut cuts
     * there); false for rows whose words hold spaces */
    bool pre_splits_words;
    bool ignore_merges; /* a word that is itself a token is not merged (Llama 3) */
    em_merge_map merges;
    /* Tokens matched in the text before tokenizing (control, unknown and user-defined), sorted
     * by first byte, then longest first, then id; special_first[b] is where byte b starts. */
    int32_t *specials;
    int32_t special_first[257];
    size_t longest_special; /* bytes of the longest special token's text */
};

/* A growable list of token ids. */
struct em_ids {
    int32_t *data;
    size_t count, capacity;
};

static inline void em_ids_push(em_ids *ids, int32_t id) {
    if (ids->count == ids->capacity) {
        ids->capacity = ids->capacity ? 2 * ids->capacity : 64;
        ids->data = em_xrealloc(ids->data, ids->capacity * sizeof(int32_t));
    }
    ids->data[ids->count++] = id;
}

/* Allocates the vocabulary and copies the n texts into it (types normal, scores 0). */
void em_vocab_init(em_vocab *vocab, int32_t n, const em_bytes *texts);

/* After the vocabulary, types and ids are set: computes pieces, maps, byte tokens and the special
 * token index. `source` names the file for errors. */
em_status em_tokenizer_finish(em_tokenizer *tok, const char *source);

/* The algorithms of the family rows: the family-specific parts of em_tokenizer_finish, per-call
 * scratch state for encoding (symbols, queue, word cache: em_spm_state, em_bpe_state), so that a
 * tokenizer can be shared by threads, and encoding one fragment of text (as the row's encode). */
void em_spm_prepare(em_tokenizer *tok);
void em_bpe_prepare(em_tokenizer *tok);

/* Adds merge number `rank`, given as "left right" (split at the first space after the first
 * byte, as llama.cpp does) or as two strings. Errors name source and the merge. */
em_status em_bpe_add_merge_text(em_tokenizer *tok, const char *source, size_t rank,
                                const char *text, size_t len);
em_status em_bpe_add_merge_pair(em_tokenizer *tok, const char *source, size_t rank,
                                const char *left, size_t left_len, const char *right,
                                size_t right_len);

void *em_spm_state_new(void);
void em_spm_state_free(void *state);
void *em_bpe_state_new(void);
void em_bpe_state_free(void *state);
em_status em_spm_encode(const em_tokenizer *tok, void *state, const char *text, size_t len,
                        size_t offset, bool prefix_space, em_ids *out);
/* Byte-level BPE has no leading-space rule: prefix_space is always false. */
em_status em_bpe_encode(const em_tokenizer *tok, void *state, const char *text, size_t len,
                        size_t offset, bool prefix_space, em_ids *out);

/* Compiles the expressions of a pre_table.h row into tok->pre (source names the file). */
em_status em_tokenizer_use_pre_row(em_tokenizer *tok, const em_pre_row *row, const char *source);

/* Loads a Hugging Face tokenizer.json (and the tokenizer_config.json beside it, if any). */
em_status em_tokenizer_from_json(const char *path, em_tokenizer **out);

#endif
