/* Registry lookup, artifact type names, input access and input-file checks for stage kinds (see
 * stage.h). */
#include "runner/stage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/regular_file.h"

bool em_input_accepts(const em_input_spec *spec, const char *type) {
    for (size_t i = 0; i < EM_INPUT_MAX_TYPES && spec->accepts[i]; i++)
        if (strcmp(spec->accepts[i], type) == 0) return true;
    return false;
}

const char *em_input_accepts_text(const em_input_spec *spec, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < EM_INPUT_MAX_TYPES && spec->accepts[i]; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? " or " : "", spec->accepts[i]);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
    return buf;
}

const em_stage_kind *em_stage_kind_find(const em_stage_kind *const *kinds, const char *name) {
    for (const em_stage_kind *const *k = kinds; *k; k++)
        if (strcmp((*k)->name, name) == 0) return *k;
    return NULL;
}

static const em_stage_input *find_input(const em_stage *self, const char *option, size_t index) {
    for (size_t i = 0; i < self->input_count; i++)
        if (strcmp(self->inputs[i].option, option) == 0 && self->inputs[i].index == index)
            return &self->inputs[i];
    return NULL;
}

const em_artifact *em_stage_input_artifact(const em_stage *self, const char *option, size_t index) {
    const em_stage_input *in = find_input(self, option, index);
    return in ? &in->producer->output : NULL;
}

const em_stage *em_stage_input_producer(const em_stage *self, const char *option, size_t index) {
    const em_stage_input *in = find_input(self, option, index);
    return in ? in->producer : NULL;
}

size_t em_stage_input_count(const em_stage *self, const char *option) {
    size_t n = 0;
    for (size_t i = 0; i < self->input_count; i++)
        if (strcmp(self->inputs[i].option, option) == 0) n++;
    return n;
}

em_status em_stage_input_file(const em_stage *self, const char *option, bool dir_ok, char **path) {
    const em_node *node = em_node_get(self->options, option);
    *path = em_node_path(node);
    struct stat st;
    const char *why = NULL;
    char kind[64];
    if (stat(*path, &st) != 0)
        why = strerror(errno);
    else if (S_ISDIR(st.st_mode) && !dir_ok)
        why = "a directory, not a file";
    else if (!S_ISDIR(st.st_mode) &&
             !S_ISREG(st.st_mode)) { /* a FIFO blocks, /dev/zero never ends */
        snprintf(kind, sizeof kind, "not a regular file (%s)", em_file_kind(st.st_mode));
        why = kind;
    } else if (access(*path, S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK) != 0)
        why = strerror(errno);
    if (!why) return NULL;
    em_status err = em_error_at(EM_EXIT_BAD_INPUT, node->mark, "stage '%s': %s %s: %s", self->name,
                                option, *path, why);
    free(*path);
    *path = NULL;
    return err;
}

struct em_mesh *em_stage_mesh(const em_stage *self, const em_run_context *ctx) {
    const em_artifact *a = em_stage_input_artifact(self, "mesh", 0);
    return a && a->data ? a->data : ctx->mesh;
}

const char *em_stage_mesh_name(const em_stage *self) {
    const em_stage *producer = em_stage_input_producer(self, "mesh", 0);
    return producer ? producer->name : "the default world mesh";
}
