/* A priority queue (binary min-heap) of candidate merges of two adjacent symbols, used by both
 * tokenizer families: the candidate with the lowest priority comes first, ties go to the leftmost
 * pair (as in llama.cpp). SentencePiece uses -score as priority, byte-level BPE the merge rank. */
#ifndef EVALMESH_TOKENIZER_BIGRAM_QUEUE_H
#define EVALMESH_TOKENIZER_BIGRAM_QUEUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct em_bigram {
    double priority;
    int32_t left, right; /* symbol indices */
    int32_t a, b;        /* checked when popped: SPM the merged byte length; BPE the two ids */
} em_bigram;

typedef struct em_bigram_queue {
    em_bigram *items;
    size_t count, capacity;
} em_bigram_queue;

void em_bigram_queue_push(em_bigram_queue *q, em_bigram item);
/* Removes the first item into *out; 0 when the queue is empty. */
int em_bigram_queue_pop(em_bigram_queue *q, em_bigram *out);
void em_bigram_queue_free(em_bigram_queue *q);

#endif
