/* Reading a text file that is one document (split none: the chunked and sliding protocols) in
 * blocks, so that memory holds the token ids and about one block of text, not the file: each
 * block is hashed, checked as UTF-8 and counted (words, bytes), and the text up to the last point
 * where the tokenizer may cut it (em_tokenizer_next_cut) is tokenized and dropped. With
 * max_tokens the tokenizing stops there; the rest of the file is still hashed and checked. A
 * stretch with no cut point (a run without spaces between letters) is held whole. */
#ifndef EVALMESH_STREAMED_TEXT_H
#define EVALMESH_STREAMED_TEXT_H

#include "stages/data/corpus.h"

/* Reads path as em_corpus_read does for EM_FORMAT_TEXT with EM_SPLIT_NONE and no detokenizer:
 * the same stream, counts, checksum and errors. */
em_status em_streamed_text_read(const char *path, const em_corpus_options *options,
                                const struct em_tokenizer *tok, em_corpus *out);

#endif
