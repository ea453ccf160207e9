/* Binary heap of merge candidates ordered by (priority, left). */
#include "stages/tokenizer/bigram_queue.h"

#include <stdbool.h>
#include <stdlib.h>

#include "util/error.h"

static bool before(const em_bigram *x, const em_bigram *y) {
    return x->priority < y->priority || (x->priority == y->priority && x->left < y->left);
}

void em_bigram_queue_push(em_bigram_queue *q, em_bigram item) {
    if (q->count == q->capacity) {
        q->capacity = q->capacity ? 2 * q->capacity : 64;
        q->items = em_xrealloc(q->items, q->capacity * sizeof(em_bigram));
    }
    size_t i = q->count++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&item, &q->items[parent])) break;
        q->items[i] = q->items[parent];
        i = parent;
    }
    q->items[i] = item;
}

int em_bigram_queue_pop(em_bigram_queue *q, em_bigram *out) {
    if (q->count == 0) return 0;
    *out = q->items[0];
    em_bigram last = q->items[--q->count];
    size_t i = 0, n = q->count;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && before(&q->items[child + 1], &q->items[child])) child++;
        if (!before(&q->items[child], &last)) break;
        q->items[i] = q->items[child];
        i = child;
    }
    if (n > 0) q->items[i] = last;
    return 1;
}

void em_bigram_queue_free(em_bigram_queue *q) {
    free(q->items);
    q->items = NULL;
    q->count = q->capacity = 0;
}
