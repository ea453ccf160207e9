/* The metrics table (see table.h). */
#include "stages/report/table.h"

#include <string.h>

#include "stages/report/strbuf.h"

char *em_report_table(const em_metrics *m) {
    int width = (int)strlen("metric");
    for (size_t i = 0; i < m->count; i++) {
        int n = (int)strlen(m->items[i].key);
        if (n > width) width = n;
    }
    em_strbuf b = {0};
    em_strbuf_printf(&b, "%-*s  %16s       ± error\n", width, "metric", "value");
    for (size_t i = 0; i < m->count; i++) {
        const em_metric *it = &m->items[i];
        em_strbuf_printf(&b, "%-*s  %16.8g", width, it->key, it->value);
        if (it->has_error) em_strbuf_printf(&b, "  ± %10.3g", it->error);
        em_strbuf_add(&b, it->timing ? "  (timing)\n" : "\n");
    }
    return em_strbuf_take(&b);
}
