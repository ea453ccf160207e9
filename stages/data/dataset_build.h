/* Building a rank's em_dataset from the corpus-wide window plan: the rank keeps windows
 * first .. last-1. Inputs and targets point into the token stream, which the dataset takes
 * over. An input that starts with a BOS or prefix token not in the stream gets it written over
 * the stream's token when no other window of the rank reads that token (every chunked window),
 * else its own copy. */
#ifndef EVALMESH_DATASET_BUILD_H
#define EVALMESH_DATASET_BUILD_H

#include "stages/data/dataset.h"
#include "stages/data/protocol.h"

/* stream (malloc'd) is owned by the dataset afterwards. path, sha256 and
 * protocol are copied. */
em_dataset *em_dataset_build(const em_window_plan *plan, int32_t *stream, int64_t first,
                             int64_t last, const char *path, const char *sha256,
                             em_protocol protocol);

#endif
