/* Building the stage graph: stages from the recipe, kinds from a registry, edges from input
 * options and `after:`, reference and type checks, cycle detection and the topological order
 * (see dag.h). */
#include "runner/dag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/schema.h"

/* Stage names become identifiers in logs, file names and metric keys. */
static int valid_stage_name(const char *s) {
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return 0;
    return 1;
}

/* The kind a stage's `kind:` names. */
static em_status find_kind(const em_stage_kind *const *kinds, const char *stage_name,
                           const em_node *stage, const em_stage_kind **out) {
    const em_map_entry *entry = em_node_get_entry(stage, "kind");
    if (!entry || em_node_is_null(entry->value))
        return em_error_at(
            EM_EXIT_BAD_INPUT, stage->mark,
            "stage '%s': missing 'kind' (the stage kind to run; see evalmesh stages)", stage_name);
    const em_node *value = entry->value;
    if (value->kind != EM_NODE_SCALAR)
        return em_error_at(EM_EXIT_BAD_INPUT, value->mark,
                           "stage '%s': 'kind' must be a string, not %s", stage_name,
                           em_node_type_name(value));
    const em_stage_kind *found = em_stage_kind_find(kinds, value->text);
    if (found) {
        *out = found;
        return NULL;
    }
    size_t count = 0;
    while (kinds[count]) count++;
    const char **names = em_xcalloc(count, sizeof *names);
    size_t list_len = 1;
    for (size_t i = 0; i < count; i++) {
        names[i] = kinds[i]->name;
        list_len += strlen(names[i]) + 2;
    }
    const char *guess = em_did_you_mean(value->text, names, count);
    em_status err;
    if (guess) {
        err = em_error_at(EM_EXIT_BAD_INPUT, value->mark,
                          "stage '%s': unknown kind '%s' (did you mean '%s'?)", stage_name,
                          value->text, guess);
    } else {
        char *list = em_xcalloc(1, list_len);
        for (size_t i = 0; i < count; i++) {
            if (i) strcat(list, ", ");
            strcat(list, names[i]);
        }
        err = em_error_at(EM_EXIT_BAD_INPUT, value->mark,
                          "stage '%s': unknown kind '%s' (known kinds: %s)", stage_name,
                          value->text, count ? list : "none");
        free(list);
    }
    free(names);
    return err;
}

em_status em_dag_check_stage(const em_stage_kind *const *kinds, const em_map_entry *entry,
                             const em_stage_kind **kind) {
    if (!valid_stage_name(entry->key))
        return em_error_at(EM_EXIT_BAD_INPUT, entry->key_mark,
                           "stage name '%s' is not valid: use letters, digits and '_', "
                           "not starting with a digit",
                           entry->key);
    if (entry->value->kind != EM_NODE_MAP)
        return em_error_at(EM_EXIT_BAD_INPUT, entry->value->mark,
                           "stage '%s' must be a map of options (with a 'kind'), not %s",
                           entry->key, em_node_type_name(entry->value));
    return find_kind(kinds, entry->key, entry->value, kind);
}

long em_dag_find(const em_dag *dag, const char *name) {
    for (size_t i = 0; i < dag->count; i++)
        if (strcmp(dag->stages[i].name, name) == 0) return (long)i;
    return -1;
}

static void push(size_t **list, size_t *count, size_t value) {
    *list = em_xrealloc(*list, (*count + 1) * sizeof **list);
    (*list)[(*count)++] = value;
}

static int compare_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts a list of indices and drops repeats. */
static void sort_unique(size_t *list, size_t *count) {
    if (*count == 0) return;
    qsort(list, *count, sizeof *list, compare_size);
    size_t kept = 1;
    for (size_t i = 1; i < *count; i++)
        if (list[i] != list[kept - 1]) list[kept++] = list[i];
    *count = kept;
}

/* "a" or "an" before an artifact type name in messages. */
static const char *article(const char *word) {
    return strchr("aeiou", word[0]) ? "an" : "a";
}

/* The nodes holding stage names in an option: the scalar itself, or the items of a list. */
static em_status reference_nodes(const em_stage *stage, const char *option, const em_node *value,
                                 const em_node *const **items, size_t *count) {
    if (value->kind == EM_NODE_SCALAR && em_node_scalar_type(value) == EM_SCALAR_STRING) {
        *items = (const em_node *const *)NULL;
        *count = 1;
        return NULL;
    }
    if (value->kind != EM_NODE_SEQ)
        return em_error_at(EM_EXIT_BAD_INPUT, value->mark,
                           "stage '%s': option '%s' must name a stage (or list stage names), "
                           "not %s",
                           stage->name, option, em_node_type_name(value));
    for (size_t i = 0; i < value->count; i++) {
        const em_node *item = value->items[i];
        if (item->kind != EM_NODE_SCALAR || em_node_scalar_type(item) != EM_SCALAR_STRING)
            return em_error_at(EM_EXIT_BAD_INPUT, item->mark,
                               "stage '%s': option '%s' must list stage names, but item %zu is %s",
                               stage->name, option, i + 1, em_node_type_name(item));
    }
    *items = (const em_node *const *)value->items;
    *count = value->count;
    return NULL;
}

/* The stage a reference names, or an error with a "did you mean" among the stage names. */
static em_status resolve_name(const em_dag *dag, const em_stage *stage, const char *option,
                              const em_node *ref, size_t *out) {
    long j = em_dag_find(dag, ref->text);
    if (j >= 0) {
        *out = (size_t)j;
        return NULL;
    }
    const char **names = em_xcalloc(dag->count, sizeof *names);
    for (size_t i = 0; i < dag->count; i++) names[i] = dag->stages[i].name;
    const char *guess = em_did_you_mean(ref->text, names, dag->count);
    em_status err;
    if (guess)
        err = em_error_at(EM_EXIT_BAD_INPUT, ref->mark,
                          "stage '%s': option '%s' names '%s', which is not a stage "
                          "(did you mean '%s'?)",
                          stage->name, option, ref->text, guess);
    else
        err = em_error_at(EM_EXIT_BAD_INPUT, ref->mark,
                          "stage '%s': option '%s' names '%s', which is not a stage", stage->name,
                          option, ref->text);
    free(names);
    return err;
}

/* Every type an input accepts is produced by some kind of the registry: else the kind has a typo
 * (a bug in evalmesh, exit status 1). */
static em_status check_accepts(const em_stage *stage, const em_input_spec *spec,
                               const em_stage_kind *const *kinds) {
    for (size_t t = 0; t < EM_INPUT_MAX_TYPES && spec->accepts[t]; t++) {
        bool produced = false;
        for (const em_stage_kind *const *k = kinds; *k && !produced; k++)
            produced = strcmp((*k)->produces, spec->accepts[t]) == 0;
        if (!produced)
            return em_error_new(EM_EXIT_FAILURE,
                                "stage kind '%s': input '%s' accepts '%s', which no stage kind "
                                "produces",
                                stage->kind->name, spec->option, spec->accepts[t]);
    }
    return NULL;
}

/* Resolves the options of stage i that the kind lists as inputs: em_stage.inputs, deps, reads. */
static em_status wire_inputs(em_dag *dag, size_t i, const em_stage_kind *const *kinds) {
    em_stage *stage = &dag->stages[i];
    em_dag_vertex *v = &dag->vertices[i];
    if (!stage->kind->inputs) return NULL;
    for (const em_input_spec *spec = stage->kind->inputs; spec->option; spec++) {
        em_status err = check_accepts(stage, spec, kinds);
        if (err) return err;
        const em_node *value = em_node_get(stage->options, spec->option);
        char need[128];
        em_input_accepts_text(spec, need, sizeof need);
        if (em_node_is_null(value)) {
            if (spec->optional) continue;
            return em_error_at(EM_EXIT_BAD_INPUT, stage->mark,
                               "stage '%s': missing option '%s' (the %s stage%s to read)",
                               stage->name, spec->option, need, spec->is_list ? "s" : "");
        }
        const em_node *const *items;
        size_t count;
        err = reference_nodes(stage, spec->option, value, &items, &count);
        if (err) return err;
        if (value->kind == EM_NODE_SEQ && !spec->is_list)
            return em_error_at(EM_EXIT_BAD_INPUT, value->mark,
                               "stage '%s': option '%s' names one stage, not a list", stage->name,
                               spec->option);
        for (size_t k = 0; k < count; k++) {
            const em_node *ref = items ? items[k] : value;
            size_t j = 0;
            if ((err = resolve_name(dag, stage, spec->option, ref, &j))) return err;
            const em_stage *producer = &dag->stages[j];
            if (!em_input_accepts(spec, producer->kind->produces)) {
                const char *has = producer->kind->produces;
                return em_error_at(EM_EXIT_BAD_INPUT, ref->mark,
                                   "stage '%s': option '%s' names '%s', %s %s stage, but needs %s",
                                   stage->name, spec->option, ref->text, article(has), has, need);
            }
            stage->inputs =
                em_xrealloc(stage->inputs, (stage->input_count + 1) * sizeof *stage->inputs);
            stage->inputs[stage->input_count++] =
                (em_stage_input){.option = spec->option, .index = k, .producer = &dag->stages[j]};
            push(&v->deps, &v->dep_count, j);
            push(&v->reads, &v->read_count, j);
        }
    }
    return NULL;
}

/* `after:` adds ordering edges: one stage name or a list of them. */
static em_status wire_after(em_dag *dag, size_t i) {
    em_stage *stage = &dag->stages[i];
    em_dag_vertex *v = &dag->vertices[i];
    const em_node *value = em_node_get(stage->options, "after");
    if (em_node_is_null(value)) return NULL;
    const em_node *const *items;
    size_t count;
    em_status err = reference_nodes(stage, "after", value, &items, &count);
    if (err) return err;
    for (size_t k = 0; k < count; k++) {
        size_t j = 0;
        if ((err = resolve_name(dag, stage, "after", items ? items[k] : value, &j))) return err;
        push(&v->deps, &v->dep_count, j);
        push(&v->after, &v->after_count, j);
    }
    return NULL;
}

/* Looks for the shortest cycle through `start` among the stages not yet ordered, following edges
 * from producer to consumer. Writes the path (start first) and returns its length, or 0. */
static size_t find_cycle(const em_dag *dag, const char *placed, size_t start, size_t *path) {
    size_t n = dag->count;
    long *parent = em_xmalloc(n * sizeof *parent);
    size_t *queue = em_xmalloc(n * sizeof *queue);
    for (size_t i = 0; i < n; i++) parent[i] = -1;
    size_t head = 0, tail = 0, length = 0;
    queue[tail++] = start;
    while (head < tail && !length) {
        size_t u = queue[head++];
        /* consumers of u, in recipe order */
        for (size_t c = 0; c < n && !length; c++) {
            if (placed[c]) continue;
            const em_dag_vertex *cv = &dag->vertices[c];
            int consumes = 0;
            for (size_t d = 0; d < cv->dep_count; d++) consumes |= cv->deps[d] == u;
            if (!consumes) continue;
            if (c == start) {
                /* walk back from u to start, then reverse */
                size_t back = 0;
                for (long w = (long)u; w != (long)start; w = parent[w]) path[back++] = (size_t)w;
                path[back++] = start;
                for (size_t a = 0, b = back - 1; a < b; a++, b--) {
                    size_t t = path[a];
                    path[a] = path[b];
                    path[b] = t;
                }
                length = back;
            } else if (parent[c] < 0) {
                parent[c] = (long)u;
                queue[tail++] = c;
            }
        }
    }
    free(parent);
    free(queue);
    return length;
}

static em_status cycle_error(const em_dag *dag, const char *placed) {
    size_t *path = em_xmalloc(dag->count * sizeof *path);
    size_t length = 0;
    for (size_t s = 0; s < dag->count && !length; s++)
        if (!placed[s]) length = find_cycle(dag, placed, s, path);
    size_t size = 16;
    for (size_t k = 0; k < length; k++) size += strlen(dag->stages[path[k]].name) + 4;
    size += strlen(dag->stages[path[0]].name);
    char *text = em_xcalloc(1, size);
    for (size_t k = 0; k < length; k++) {
        strcat(text, dag->stages[path[k]].name);
        strcat(text, " -> ");
    }
    strcat(text, dag->stages[path[0]].name);
    em_status err = em_error_at(EM_EXIT_BAD_INPUT, dag->stages[path[0]].mark, "cycle: %s", text);
    free(text);
    free(path);
    return err;
}

/* Kahn's algorithm, always taking the ready stage that comes first in the recipe. */
static em_status sort_topologically(em_dag *dag) {
    size_t n = dag->count;
    char *placed = em_xcalloc(n, 1);
    dag->order = em_xmalloc(n * sizeof *dag->order);
    for (size_t k = 0; k < n; k++) {
        size_t next = n;
        for (size_t i = 0; i < n && next == n; i++) {
            if (placed[i]) continue;
            int ready = 1;
            for (size_t d = 0; d < dag->vertices[i].dep_count; d++)
                ready &= placed[dag->vertices[i].deps[d]];
            if (ready) next = i;
        }
        if (next == n) {
            em_status err = cycle_error(dag, placed);
            free(placed);
            return err;
        }
        placed[next] = 1;
        dag->order[k] = next;
        dag->vertices[next].position = k;
    }
    free(placed);
    return NULL;
}

em_status em_dag_build(em_node *stages_map, const em_stage_kind *const *kinds, em_dag **out) {
    *out = NULL;
    if (stages_map->kind != EM_NODE_MAP)
        return em_error_at(EM_EXIT_BAD_INPUT, stages_map->mark,
                           "'stages' must be a map from stage names to stages, not %s",
                           em_node_type_name(stages_map));
    if (stages_map->count == 0)
        return em_error_at(EM_EXIT_BAD_INPUT, stages_map->mark,
                           "'stages' is empty: a recipe needs at least one stage");
    em_dag *dag = em_xcalloc(1, sizeof *dag);
    dag->count = stages_map->count;
    dag->stages = em_xcalloc(dag->count, sizeof *dag->stages);
    dag->vertices = em_xcalloc(dag->count, sizeof *dag->vertices);
    em_status err = NULL;
    for (size_t i = 0; i < dag->count && !err; i++) {
        const em_map_entry *e = &stages_map->entries[i];
        em_stage *stage = &dag->stages[i];
        stage->name = e->key;
        stage->mark = e->key_mark;
        stage->options = e->value;
        err = em_dag_check_stage(kinds, e, &stage->kind);
    }
    for (size_t i = 0; i < dag->count && !err; i++)
        if (!(err = wire_inputs(dag, i, kinds))) err = wire_after(dag, i);
    if (!err) {
        for (size_t i = 0; i < dag->count; i++) {
            em_dag_vertex *v = &dag->vertices[i];
            sort_unique(v->deps, &v->dep_count);
            sort_unique(v->reads, &v->read_count);
            for (size_t r = 0; r < v->read_count; r++) dag->vertices[v->reads[r]].reader_count++;
        }
        err = sort_topologically(dag);
    }
    if (err) {
        em_dag_free(dag);
        return err;
    }
    *out = dag;
    return NULL;
}

void em_dag_free(em_dag *dag) {
    if (!dag) return;
    for (size_t i = 0; i < dag->count; i++) {
        free(dag->stages[i].inputs);
        free(dag->vertices[i].deps);
        free(dag->vertices[i].reads);
        free(dag->vertices[i].after);
    }
    free(dag->stages);
    free(dag->vertices);
    free(dag->order);
    free(dag);
}
