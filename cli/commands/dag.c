/* `evalmesh dag RECIPE [overrides] [--dot]`: the wired stage graph of a recipe, as text in the
 * order every rank runs it, or as a Graphviz digraph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "runner/pipeline.h"
#include "util/log.h"

static const char usage[] =
    "usage: evalmesh dag RECIPE [KEY.PATH=VALUE | ~KEY.PATH ...] [--dot]\n"
    "\n"
    "Prints the recipe's stages in topological order (the order every rank follows; ties\n"
    "keep recipe order) with each stage's kind, the artifact it produces, and the stages it\n"
    "reads (option: stage) or waits for (after:). Collective stages run one at a time in\n"
    "this order; the others may overlap. With --dot, prints a Graphviz digraph instead:\n"
    "  evalmesh dag recipes/demo.yaml --dot | dot -Tsvg > dag.svg\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad recipe or arguments.\n";

/* "model: ref, inputs: [f_ref, f_q4]; after: env" into a new string. */
static char *describe_reads(const em_dag *dag, size_t i) {
    const em_stage *stage = &dag->stages[i];
    const em_dag_vertex *v = &dag->vertices[i];
    size_t size = 16;
    for (size_t k = 0; k < stage->input_count; k++)
        size += strlen(stage->inputs[k].option) + strlen(stage->inputs[k].producer->name) + 8;
    for (size_t k = 0; k < v->after_count; k++) size += strlen(dag->stages[v->after[k]].name) + 4;
    char *text = em_xcalloc(1, size);
    for (size_t k = 0; k < stage->input_count; k++) {
        const em_stage_input *in = &stage->inputs[k];
        size_t count = em_stage_input_count(stage, in->option);
        int list = em_node_get(stage->options, in->option)->kind == EM_NODE_SEQ;
        if (in->index == 0) {
            if (k) strcat(text, ", ");
            strcat(text, in->option);
            strcat(text, list ? ": [" : ": ");
        } else {
            strcat(text, ", ");
        }
        strcat(text, in->producer->name);
        if (list && in->index + 1 == count) strcat(text, "]");
    }
    if (v->after_count) strcat(text, stage->input_count ? "; after: " : "after: ");
    for (size_t k = 0; k < v->after_count; k++) {
        if (k) strcat(text, ", ");
        strcat(text, dag->stages[v->after[k]].name);
    }
    if (!text[0]) strcat(text, "-");
    return text;
}

static void print_text(const em_pipeline *p) {
    const em_dag *dag = p->dag;
    int name_w = 5, kind_w = 4, type_w = 8;
    for (size_t i = 0; i < dag->count; i++) {
        int n = (int)strlen(dag->stages[i].name), k = (int)strlen(dag->stages[i].kind->name);
        int t = (int)strlen(dag->stages[i].kind->produces);
        if (n > name_w) name_w = n;
        if (k > kind_w) kind_w = k;
        if (t > type_w) type_w = t;
    }
    printf("%s: %zu stage%s in topological order\n", p->path, dag->count,
           dag->count == 1 ? "" : "s");
    printf("  %3s  %-*s  %-*s  %-*s  %s\n", "#", name_w, "stage", kind_w, "kind", type_w,
           "produces", "reads");
    for (size_t k = 0; k < dag->count; k++) {
        size_t i = dag->order[k];
        const em_stage *s = &dag->stages[i];
        char *reads = describe_reads(dag, i);
        printf("  %3zu  %-*s  %-*s  %-*s  %s\n", k + 1, name_w, s->name, kind_w, s->kind->name,
               type_w, s->kind->produces, reads);
        free(reads);
    }
    int any = 0;
    for (size_t k = 0; k < dag->count; k++) {
        const em_stage *s = &dag->stages[dag->order[k]];
        if (!s->kind->collective) continue;
        printf("%s%s", any ? ", " : "collective stages, one at a time in this order: ", s->name);
        any = 1;
    }
    if (any) printf("\n");
}

static void print_dot(const em_pipeline *p) {
    const em_dag *dag = p->dag;
    printf("digraph \"%s\" {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
           p->name);
    for (size_t k = 0; k < dag->count; k++) {
        const em_stage *s = &dag->stages[dag->order[k]];
        printf("  \"%s\" [label=\"%s\\n%s -> %s\"%s];\n", s->name, s->name, s->kind->name,
               s->kind->produces, s->kind->collective ? ", style=bold" : "");
    }
    for (size_t k = 0; k < dag->count; k++) {
        size_t i = dag->order[k];
        const em_stage *s = &dag->stages[i];
        for (size_t n = 0; n < s->input_count; n++)
            printf("  \"%s\" -> \"%s\" [label=\"%s\"];\n", s->inputs[n].producer->name, s->name,
                   s->inputs[n].option);
        const em_dag_vertex *v = &dag->vertices[i];
        for (size_t n = 0; n < v->after_count; n++)
            printf("  \"%s\" -> \"%s\" [style=dashed, label=\"after\"];\n",
                   dag->stages[v->after[n]].name, s->name);
    }
    printf("}\n");
}

static int dag_main(int argc, char **argv) {
    static const struct option options[] = {
        {"dot", no_argument, NULL, 'd'},
        {0},
    };
    int dot = 0, c;
    while ((c = em_cli_option("dag", argc, argv, "", options)) != -1) {
        if (c != 'd') return EM_EXIT_BAD_INPUT;
        dot = 1;
    }
    if (optind >= argc) {
        em_log_error("evalmesh dag: missing RECIPE (see evalmesh dag --help)");
        return EM_EXIT_BAD_INPUT;
    }
    const char *recipe = argv[optind];
    /* the operands after RECIPE are overrides */
    const char *const *overrides = (const char *const *)argv + optind + 1;
    size_t override_count = (size_t)(argc - optind - 1);
    em_pipeline *p;
    em_status err = em_pipeline_load(recipe, overrides, override_count, &p);
    if (err) {
        int code = err->exit_code;
        em_log_error("%s", err->message);
        em_error_free(err);
        return code;
    }
    if (dot)
        print_dot(p);
    else
        print_text(p);
    em_pipeline_free(p);
    return EM_EXIT_OK;
}

const em_command em_command_dag = {
    .name = "dag",
    .summary = "print a recipe's stage graph (text, or Graphviz with --dot)",
    .usage = usage,
    .main = dag_main,
};
