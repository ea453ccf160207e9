/* Preparing a recipe for a run: overrides, schema checks with defaults, the stage graph (see
 * pipeline.h). */
#include "runner/pipeline.h"

#include <stdio.h>
#include <stdlib.h>

#include "runner/recipe/recipe.h"
#include "runner/recipe/schema.h"
#include "util/log.h"

/* Checks root against an embedded schema; a missing or broken schema is a bug in evalmesh. */
static em_status validate_with(const char *schema_path, em_node *root, const char *what) {
    em_schema *schema;
    em_status err = em_schema_load_embedded(schema_path, &schema);
    if (err) {
        err->exit_code = EM_EXIT_FAILURE;
        return em_error_prefix(err, "schema %s", schema_path);
    }
    err = em_schema_validate(schema, root, what);
    em_schema_free(schema);
    return err;
}

/* Every stage: its name and kind, then its options against the kind's schema. */
static em_status validate_stages(em_node *stages) {
    if (stages->kind != EM_NODE_MAP) return NULL; /* em_dag_build says what is wrong */
    for (size_t i = 0; i < stages->count; i++) {
        const em_map_entry *e = &stages->entries[i];
        const em_stage_kind *kind;
        em_status err = em_dag_check_stage(em_stage_kinds, e, &kind);
        if (err) return err;
        char *what = em_xasprintf("stage '%s'", e->key);
        err = em_schema_validate_stage(e->value, kind->name, what);
        free(what);
        if (err) return err;
    }
    return NULL;
}

em_status em_pipeline_from_tree(em_node *recipe, const char *path, const char *const *overrides,
                                size_t override_count, em_pipeline **out) {
    *out = NULL;
    em_status err = NULL;
    for (size_t i = 0; i < override_count && !err; i++)
        err = em_recipe_apply_override(recipe, overrides[i]);
    if (!err) err = validate_with("recipe.schema.json", recipe, "recipe");
    em_node *stages = em_node_get(recipe, "stages");
    if (!err && !stages)
        err = em_error_at(EM_EXIT_BAD_INPUT, recipe->mark, "recipe: missing 'stages'");
    if (!err) err = validate_stages(stages);
    em_dag *dag = NULL;
    if (!err) err = em_dag_build(stages, em_stage_kinds, &dag);
    if (err) {
        em_node_free(recipe);
        return err;
    }
    em_pipeline *p = em_xcalloc(1, sizeof *p);
    p->recipe = recipe;
    p->path = em_intern(path);
    p->name = em_node_option_string(recipe, "name");
    p->seed = em_node_option_int(recipe, "seed");
    p->init_timeout_s = em_node_option_double(recipe, "init_timeout_s");
    p->collective_timeout_s = em_node_option_double(recipe, "collective_timeout_s");
    p->log_level = em_node_get_string(recipe, "log_level", NULL);
    p->dag = dag;
    *out = p;
    return NULL;
}

em_status em_pipeline_load(const char *path, const char *const *overrides, size_t override_count,
                           em_pipeline **out) {
    *out = NULL;
    em_node *recipe;
    em_status err = em_recipe_load(path, &recipe);
    if (err) return err;
    return em_pipeline_from_tree(recipe, path, overrides, override_count, out);
}

double em_pipeline_default_init_timeout(void) {
    em_schema *schema;
    em_status err = em_schema_load_embedded("recipe.schema.json", &schema);
    double seconds = 0;
    bool found = !err && em_schema_default_number(schema, "#/properties/init_timeout_s", &seconds);
    em_error_free(err);
    em_schema_free(schema);
    if (!found) {
        fprintf(stderr, "evalmesh: bug: recipe.schema.json has no default init_timeout_s\n");
        exit(EM_EXIT_FAILURE);
    }
    return seconds;
}

void em_pipeline_warn_without_results(const em_pipeline *p) {
    for (size_t i = 0; i < p->dag->count; i++)
        if (p->dag->stages[i].kind->writes_results) return;
    em_log_warn("%s: no stage writes results (add a report stage): nothing will be written but "
                "the run directory's log and state",
                p->path);
}

em_run_context em_pipeline_context(const em_pipeline *p, const em_bootstrap *boot) {
    const em_bootstrap alone = {.size = 1, .local_size = 1, .node_count = 1};
    if (!boot) boot = &alone;
    return (em_run_context){
        .rank = boot->rank,
        .world_size = boot->size,
        .local_rank = boot->local_rank,
        .local_size = boot->local_size,
        .node_id = boot->node_id,
        .node_count = boot->node_count,
        .world = boot->world,
        .run_dir = NULL,
        .recipe_name = p->name,
        .recipe = p->recipe,
        .seed = p->seed,
        .collective_timeout_s = p->collective_timeout_s,
    };
}

void em_pipeline_free(em_pipeline *pipeline) {
    if (!pipeline) return;
    em_dag_free(pipeline->dag);
    em_node_free(pipeline->recipe);
    free(pipeline);
}
