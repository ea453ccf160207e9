/* Text to token ids and back, for the two tokenizer families Llama-style models use:
 * SentencePiece-style BPE (GGUF `tokenizer.ggml.model = llama`) and byte-level BPE
 * (`gpt2`, with the pre-tokenizer regexes of llama.cpp's table), loaded from GGUF metadata or
 * a Hugging Face tokenizer.json. */
#ifndef EVALMESH_TOKENIZER_H
#define EVALMESH_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct em_tokenizer em_tokenizer;

/* Loads from a GGUF file (its tokenizer.* metadata) or a tokenizer.json (with a
 * tokenizer_config.json beside it when present, for add_bos/add_eos and special tokens). A folder
 * means its tokenizer.json. A file starting with "GGUF" is read as GGUF, any other as JSON.
 * Supported: GGUF tokenizer.ggml.model "llama" and "gpt2" with every tokenizer.ggml.pre name
 * llama.cpp knows (pre_table.h; an unknown name is an error naming the closest known one) but the
 * few that are not byte-level BPE; tokenizer.json with model.type BPE and either a ByteLevel
 * pre-tokenizer (with Split and Digits steps whose expressions are one of those rows) or
 * SentencePiece's "▁" for spaces (normalizer Prepend/Replace or a Metaspace pre-tokenizer; the
 * merge order gives the scores). Anything else, missing keys,
 * merges naming unknown tokens ("merge 17 'a bx' refers to unknown token 'bx'", merges counted from
 * 0) and out-of-range ids are errors with exit status 2 naming the file. */
em_status em_tokenizer_load(const char *path, em_tokenizer **out);
void em_tokenizer_free(em_tokenizer *tok);
struct em_gguf;
/* Builds the tokenizer described by a GGUF file's tokenizer.ggml.* metadata. */
em_status em_tokenizer_from_gguf(const struct em_gguf *gguf, em_tokenizer **out);

typedef struct em_encode_options {
    bool add_bos; /* prepend BOS (default: what the tokenizer file says) */
    bool add_eos;
    bool parse_special; /* match special tokens (e.g. "<|begin_of_text|>") in the text */
    /* 0: the text stands alone. Else it is the rest of a longer text from this byte offset, cut
     * at a point em_tokenizer_next_cut gave, whose earlier part was encoded before: no BOS and no
     * SentencePiece leading "▁", so the parts' ids end to end are the whole text's; error
     * offsets count from the whole text's start. */
    size_t continue_at;
} em_encode_options;

/* The tokenizer file's own choices for add_bos/add_eos, parse_special off. */
em_encode_options em_tokenizer_default_options(const em_tokenizer *tok);

/* Encodes len bytes of text into *ids (malloc'd, never NULL on success; *count entries). Text that
 * is not valid UTF-8 is an error naming the byte offset (exit status 2).
 *
 * Behaviour in detail (it follows llama.cpp, whose test vocabularies it reproduces exactly):
 * - Invalid UTF-8 (a stray continuation byte, a truncated sequence, an overlong form, a surrogate,
 *   a value past U+10FFFF) is rejected as a whole: nothing is encoded, and the error reads
 *   "text is not valid UTF-8 at byte offset N (byte 0xXX)" with N counted from 0. NUL bytes are
 *   valid text.
 * - Special tokens: user-defined tokens are always matched in the text; control and unknown tokens
 *   (e.g. "<|begin_of_text|>", "<s>") only with parse_special. At each position the longest
 *   matching special token wins.
 * - SentencePiece ("llama"): with add_space_prefix (the default) a "▁" goes before the text and
 *   after every special token; spaces become "▁"; characters the vocabulary lacks become byte
 *   tokens <0xNN>, or the unknown token when there are none (an error when there is none either).
 * - Byte-level BPE ("gpt2"): a byte whose character is not in the vocabulary is an error naming
 *   its offset (real vocabularies have all 256).
 * - An error for add_bos/add_eos when the tokenizer has no such token.
 * Defaults (em_tokenizer_default_options): GGUF add_bos_token/add_eos_token when present, else
 * add_bos for "llama" and for the pre-tokenizer names llama.cpp gives it (llama3, tekken...);
 * tokenizer.json: a TemplateProcessing post-processor that puts a special token before (after) the
 * text means add_bos (add_eos), and tokenizer_config.json's add_bos_token/add_eos_token override.
 */
em_status em_tokenizer_encode(const em_tokenizer *tok, const char *text, size_t len,
                              em_encode_options options, int32_t **ids, size_t *count);
/* Where text may be cut so that encoding text[0..p) and then text[p..len) with continue_at = p
 * (plus the same options) gives exactly the ids of encoding all of it: the first such p at or
 * after from, else len. That is before a space between two ASCII letters, with no special token
 * matching over or next to it. Byte-level BPE: only when the pre-tokenizer starts a word there
 * (the word-at-a-time rows of pre_table.h, where letters, contractions and digit runs never take a
 * following space; checked on a probe text when the tokenizer loads), never for rows whose words
 * hold spaces (whole lines, letters joined by spaces). SentencePiece: a "▁" after another
 * character starts a word, and no merge crosses a word start when no token has "▁" after another
 * character; never for vocabularies that have one. Points closer to len than the longest special
 * token are not given (what follows could change them). */
size_t em_tokenizer_next_cut(const em_tokenizer *tok, const char *text, size_t len, size_t from);

/* Receives the ids of one piece of text, in order; setting *enough stops the encoding (the rest
 * of the text is not encoded, and no EOS is added). */
typedef void (*em_encode_sink)(void *context, const int32_t *ids, size_t count, bool *enough);

/* em_tokenizer_encode's ids, the same ones exactly, handed to sink piece by piece so that the
 * whole text's ids and scratch need not be held at once: the text is cut at the first
 * em_tokenizer_next_cut point at least piece_bytes past the last (0: no cuts); a text without
 * such points is one piece. */
em_status em_tokenizer_encode_pieces(const em_tokenizer *tok, const char *text, size_t len,
                                     em_encode_options options, size_t piece_bytes,
                                     em_encode_sink sink, void *sink_context);

/* Decodes ids back to text (malloc'd, NUL-terminated; *len bytes). Special tokens are skipped
 * unless keep_special. An id out of range is an error (exit status 2).
 *
 * Round trips: decode(encode(text)) == text for all valid UTF-8 text without special tokens,
 * for both families, with these SentencePiece exceptions: a literal "▁" (U+2581) in the text
 * decodes as a space (SentencePiece spells spaces with it); the space the leading-space rule adds
 * is dropped from the first text token only (special tokens before it do not count), so with
 * parse_special the "▁" added after a special token inside the text decodes as a space
 * ("Hi</s>there" decodes, keeping specials, as "Hi</s> there"; "<s>Hi" comes back as it was);
 * text that needed the unknown token cannot come back. */
em_status em_tokenizer_decode(const em_tokenizer *tok, const int32_t *ids, size_t count,
                              bool keep_special, char **text, size_t *len);

int32_t em_tokenizer_vocab_size(const em_tokenizer *tok);
int32_t em_tokenizer_bos(const em_tokenizer *tok); /* -1 when there is none */
int32_t em_tokenizer_eos(const em_tokenizer *tok);
const char *em_tokenizer_kind(const em_tokenizer *tok); /* "llama" (SentencePiece) or "gpt2" */
const char *em_tokenizer_token_text(const em_tokenizer *tok, int32_t id);

/* Whether token ids mean the same in a and b (same family, every id's text, BOS and EOS); when
 * not, why (at most size bytes) names the first difference with a_name and b_name, e.g.
 * "token 17 is 'the' in A but 'then' in B". */
bool em_tokenizer_same_ids(const em_tokenizer *a, const char *a_name, const em_tokenizer *b,
                           const char *b_name, char *why, size_t size);

#endif
