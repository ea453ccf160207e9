/* lm-evaluation-harness's wikitext_detokenizer (lm_eval/tasks/wikitext/preprocess_wikitext.py):
 * undoes WikiText's tokenization (" @-@ " -> "-", " , " -> ", ", spaces inside brackets and
 * quotes, "= = =" -> "===", ...) before the text is scored. lm-eval counts words and bytes on
 * the original text, and so does the dataset stage. Each rule is applied to the whole text in
 * order, with Python's str.replace / re.sub semantics (one left-to-right pass, no overlaps). */
#ifndef EVALMESH_WIKITEXT_DETOK_H
#define EVALMESH_WIKITEXT_DETOK_H

#include <stddef.h>

/* A malloc'd, NUL-terminated detokenized copy of text[0..len); *out_len its length. */
char *em_wikitext_detokenize(const char *text, size_t len, size_t *out_len);

#endif
