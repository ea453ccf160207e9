/* Size parsing and the clock for the communication diagnostics (see bench_args.h). */
#include "runner/diag/bench_args.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>

bool em_parse_bytes(const char *text, size_t *bytes) {
    if (!text || !isdigit((unsigned char)*text)) return false;
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    unsigned long long scale = 1;
    switch (*end) {
    case 0:
        break;
    case 'k':
    case 'K':
        scale = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        scale = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        scale = 1ull << 30;
        end++;
        break;
    default:
        return false;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end != 0 || value > SIZE_MAX / scale) return false;
    *bytes = (size_t)(value * scale);
    return true;
}
