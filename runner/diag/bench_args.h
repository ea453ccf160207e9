/* Small helpers shared by the communication diagnostics (bench-comm, test-network): byte sizes
 * with K/M/G suffixes and bandwidth units. */
#ifndef EVALMESH_BENCH_ARGS_H
#define EVALMESH_BENCH_ARGS_H

#include <stdbool.h>
#include <stddef.h>

/* Parses "8", "64K", "256M", "1G" (powers of 1024) into *bytes; false when malformed. */
bool em_parse_bytes(const char *text, size_t *bytes);

#endif
