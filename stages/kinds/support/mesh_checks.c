/* The mesh checks stage kinds share (see mesh_checks.h). */
#include "stages/kinds/support/mesh_checks.h"

/* The first stage that `option` of self names whose mesh is not self's, or NULL. */
static const em_stage *mesh_mismatch(const em_stage *self, const char *option) {
    const em_stage *mine = em_stage_input_producer(self, "mesh", 0);
    for (size_t i = 0; i < em_stage_input_count(self, option); i++) {
        const em_stage *input = em_stage_input_producer(self, option, i);
        if (em_stage_input_producer(input, "mesh", 0) != mine) return input;
    }
    return NULL;
}

/* Self's `mesh:` when it names one, else `option`, else the stage. */
static em_mark mesh_mark(const em_stage *self, const char *option) {
    bool named = em_stage_input_producer(self, "mesh", 0) != NULL;
    const em_map_entry *e = em_node_get_entry(self->options, named ? "mesh" : option);
    return e ? e->value->mark : self->mark;
}

em_status em_stage_check_dataset_mesh(const em_stage *self) {
    const em_stage *data = mesh_mismatch(self, "data");
    if (!data) return NULL;
    return em_error_at(EM_EXIT_BAD_INPUT, mesh_mark(self, "data"),
                       "stage '%s': runs on %s, but dataset '%s' split its windows over %s (give "
                       "both the same `mesh:`)",
                       self->name, em_stage_mesh_name(self), data->name, em_stage_mesh_name(data));
}

em_status em_stage_check_inputs_mesh(const em_stage *self, const char *option) {
    const em_stage *input = mesh_mismatch(self, option);
    if (!input) return NULL;
    return em_error_at(EM_EXIT_BAD_INPUT, mesh_mark(self, option),
                       "stage '%s': reduces over %s, but its input '%s' ran on %s (name the same "
                       "mesh stage in both)",
                       self->name, em_stage_mesh_name(self), input->name,
                       em_stage_mesh_name(input));
}

em_status em_stage_check_whole_windows(const em_stage *self, const char *why) {
    const em_stage *mesh = em_stage_input_producer(self, "mesh", 0);
    static const char *const sizes[] = {"tp", "cp"};
    for (size_t i = 0; mesh && i < sizeof sizes / sizeof *sizes; i++) {
        const em_node *n = em_node_get(mesh->options, sizes[i]);
        if (!n || em_node_scalar_type(n) != EM_SCALAR_INT) continue; /* `auto`: checked in run */
        int64_t size = em_node_option_int(mesh->options, sizes[i]);
        if (size > 1)
            return em_error_at(EM_EXIT_BAD_INPUT, mesh_mark(self, "data"),
                               "stage '%s': mesh '%s' has %s = %lld, but %s (use tp = cp = 1; dp "
                               "splits the windows)",
                               self->name, mesh->name, sizes[i], (long long)size, why);
    }
    return NULL;
}

em_status em_stage_mesh_whole_windows(const em_stage *self, const em_mesh *mesh, const char *why) {
    if (mesh->tp == 1 && mesh->cp == 1) return NULL;
    return em_error_new(EM_EXIT_BAD_INPUT, "%s has tp = %d, cp = %d, but %s (use tp = cp = 1)",
                        em_stage_mesh_name(self), mesh->tp, mesh->cp, why);
}
