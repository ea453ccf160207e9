/* Whether two tokenizers give token ids the same meaning (em_tokenizer_same_ids, tokenizer.h):
 * the same family, the same vocabulary (every id's text, byte for byte) and the same BOS and EOS
 * ids. Merges and pre-tokenizers are not compared: they change how text is split, not what an id
 * means, and a model scores ids. */
#include <stdio.h>
#include <string.h>

#include "stages/tokenizer/tokenizer.h"
#include "stages/tokenizer/tokenizer_impl.h"

/* At most 40 bytes of a token's text, quoted, for messages. */
static void quoted(const em_bytes *t, char *out, size_t size) {
    int n = t->len > 40 ? 40 : (int)t->len;
    snprintf(out, size, "'%.*s'%s", n, t->data, t->len > 40 ? "..." : "");
}

bool em_tokenizer_same_ids(const em_tokenizer *a, const char *a_name, const em_tokenizer *b,
                           const char *b_name, char *why, size_t size) {
    if (a->family != b->family) {
        snprintf(why, size, "%s has a %s tokenizer, %s a %s one", a_name, em_tokenizer_kind(a),
                 b_name, em_tokenizer_kind(b));
        return false;
    }
    if (a->vocab.n_tokens != b->vocab.n_tokens) {
        snprintf(why, size, "%s has a vocabulary of %d tokens, %s of %d", a_name,
                 (int)a->vocab.n_tokens, b_name, (int)b->vocab.n_tokens);
        return false;
    }
    for (int32_t id = 0; id < a->vocab.n_tokens; id++) {
        const em_bytes *x = &a->vocab.text[id], *y = &b->vocab.text[id];
        if (x->len == y->len && memcmp(x->data, y->data, x->len) == 0) continue;
        char tx[64], ty[64];
        quoted(x, tx, sizeof tx);
        quoted(y, ty, sizeof ty);
        snprintf(why, size, "token %d is %s in %s but %s in %s", (int)id, tx, a_name, ty, b_name);
        return false;
    }
    const char *which[2] = {"BOS", "EOS"};
    const int32_t ids[2][2] = {{a->bos, b->bos}, {a->eos, b->eos}};
    for (int i = 0; i < 2; i++)
        if (ids[i][0] != ids[i][1]) {
            snprintf(why, size, "the %s token is %d in %s but %d in %s (-1: none)", which[i],
                     (int)ids[i][0], a_name, (int)ids[i][1], b_name);
            return false;
        }
    return true;
}
