/* Lookup and release of per-channel activation statistics (activation_stats.h). */
#include "stages/quant/activation_stats.h"

#include <stdlib.h>
#include <string.h>

const em_activation_stat *em_activation_stats_find(const em_activation_stats *s, const char *name) {
    if (!s || !name) return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->entries[i].name, name) == 0) return &s->entries[i];
    return NULL;
}

void em_activation_stats_free(em_activation_stats *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->entries[i].name);
        free(s->entries[i].sum_x2);
        free(s->entries[i].sum_abs);
        free(s->entries[i].max_abs);
    }
    free(s->entries);
    free(s->dataset);
    free(s);
}
