/* The `device` of a stage as a forward backend, and its `precision` (see forward_device.h). */
#include "stages/kinds/support/forward_device.h"

#include <string.h>

static bool scores(const em_forward_backend *be) {
    return be->score_batch != NULL;
}
static bool scores_pairs(const em_forward_backend *be) {
    return be->score_pair != NULL;
}
static bool observes(const em_forward_backend *be) {
    return be->observe != NULL;
}

/* One row per use: whether a backend offers it, and how messages say it. */
static const struct {
    bool (*offered)(const em_forward_backend *be);
    const char *that; /* follows "a forward backend of this build" */
} uses[] = {
    [EM_FORWARD_SCORE] = {scores, ""},
    [EM_FORWARD_PAIRS] = {scores_pairs, " that scores pairs"},
    [EM_FORWARD_OBSERVE] = {observes, " that shows the linear layers' inputs"},
};

em_status em_stage_forward_backend(const em_stage *self, em_forward_use use,
                                   const em_forward_backend **out) {
    const char *device = em_node_option_string(self->options, "device");
    const em_map_entry *e = em_node_get_entry(self->options, "device");
    em_mark at = e ? e->value->mark : self->mark;
    const em_forward_backend *be = em_forward_backend_find(device);
    em_status err = be && be->available ? be->available() : NULL;
    if (err) return em_error_prefix_at(err, at, "stage '%s': device %s", self->name, device);
    if (!be || !uses[use].offered(be))
        return em_error_at(EM_EXIT_BAD_INPUT, at,
                           "stage '%s': device '%s' is not a forward backend of this build%s (%s)",
                           self->name, device, uses[use].that, em_forward_backend_names());
    *out = be;
    return NULL;
}

static bool runs_ggml(const em_forward_backend *be) {
    return be->ggml_precision;
}
static bool runs_bf16(const em_forward_backend *be) {
    return be->bf16_precision;
}

em_status em_stage_precision(const em_stage *self, const em_forward_backend *be,
                             em_precision *out) {
    const char *value = em_node_option_string(self->options, "precision");
    if (!em_precision_parse(value, out)) *out = EM_PRECISION_EXACT; /* the schema checked it */
    bool (*runs)(const em_forward_backend *) = *out == EM_PRECISION_GGML   ? runs_ggml
                                               : *out == EM_PRECISION_BF16 ? runs_bf16
                                                                           : NULL;
    if (!runs || runs(be)) return NULL;
    const em_map_entry *e = em_node_get_entry(self->options, "precision");
    char running[128];
    em_forward_backend_names_where(runs, running, sizeof running);
    return em_error_at(EM_EXIT_BAD_INPUT, e ? e->value->mark : self->mark,
                       "stage '%s': precision: %s needs device %s (device %s runs only exact)",
                       self->name, value, running, be->name);
}
