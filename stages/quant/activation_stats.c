/* Lookup, digest and release of per-channel activation statistics (activation_stats.h). */
#include "stages/quant/activation_stats.h"

#include <stdlib.h>
#include <string.h>

const em_activation_stat *em_activation_stats_find(const em_activation_stats *s, const char *name) {
    if (!s || !name) return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->entries[i].name, name) == 0) return &s->entries[i];
    return NULL;
}

void em_activation_stats_digest(const em_activation_stats *s, char hex[EM_DIGEST_HEX]) {
    em_content_digest d;
    em_content_digest_init(&d);
    int64_t counts[4] = {(int64_t)s->n, s->has_abs, s->tokens, s->windows};
    em_content_digest_update(&d, counts, sizeof counts);
    em_content_digest_update(&d, &s->window_len, sizeof s->window_len);
    for (size_t i = 0; i < s->n; i++) {
        const em_activation_stat *e = &s->entries[i];
        size_t columns = (size_t)e->columns;
        em_content_digest_update(&d, e->name, strlen(e->name) + 1);
        em_content_digest_update(&d, &e->columns, sizeof e->columns);
        em_content_digest_update(&d, &e->count, sizeof e->count);
        em_content_digest_update(&d, e->sum_x2, columns * sizeof *e->sum_x2);
        if (e->sum_abs) em_content_digest_update(&d, e->sum_abs, columns * sizeof *e->sum_abs);
        if (e->max_abs) em_content_digest_update(&d, e->max_abs, columns * sizeof *e->max_abs);
    }
    em_content_digest_final(&d, hex);
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
