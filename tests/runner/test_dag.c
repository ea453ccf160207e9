/* Unit tests of the stage graph (runner/dag.c) with test-only stage kinds: topological order and
 * its ties, edges from input options and `after:`, and every error a recipe's wiring can have,
 * each with its exact message and place. */
#include "test.h"
#include "test_kinds.h"

#include "runner/dag.h"

/* Builds the graph of a recipe text; returns the error message (caller frees) or NULL. */
static char *build(const char *text, em_dag **dag, em_node **root) {
    em_node *stages = parse_recipe(text, root);
    em_status err = em_dag_build(stages, em_stage_kinds, dag);
    if (!err) return NULL;
    CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
    char *message = em_xstrdup(err->message);
    em_error_free(err);
    return message;
}

/* The error a recipe text gives, compared with the expected message. */
static void expect_error(const char *text, const char *expected) {
    em_dag *dag = NULL;
    em_node *root;
    char *message = build(text, &dag, &root);
    CHECK(dag == NULL);
    CHECK_STR_EQ(message, expected);
    free(message);
    em_node_free(root);
}

/* The stage names in topological order, joined by spaces. */
static const char *order_text(const em_dag *dag, char *buf, size_t size) {
    buf[0] = 0;
    for (size_t k = 0; k < dag->count; k++) {
        if (k) strncat(buf, " ", size - strlen(buf) - 1);
        strncat(buf, dag->stages[dag->order[k]].name, size - strlen(buf) - 1);
    }
    return buf;
}

static void test_order_and_ties(void) {
    /* c needs a; d needs c; a and b are ready at once: ties go by recipe order. */
    const char *text = "stages:\n"
                       "  c: {kind: use, data: a}\n"
                       "  a: {kind: src}\n"
                       "  b: {kind: src}\n"
                       "  d: {kind: agg, inputs: [c]}\n";
    em_dag *dag;
    em_node *root;
    char *message = build(text, &dag, &root);
    CHECK(message == NULL);
    if (dag) {
        char buf[256];
        CHECK_STR_EQ(order_text(dag, buf, sizeof buf), "a c b d");
        CHECK_INT_EQ(dag->count, 4);
        long c = em_dag_find(dag, "c"), a = em_dag_find(dag, "a");
        CHECK_INT_EQ(c, 0);
        CHECK_INT_EQ(a, 1);
        CHECK_INT_EQ(em_dag_find(dag, "zz"), -1);
        CHECK_INT_EQ(dag->vertices[c].dep_count, 1);
        CHECK_INT_EQ(dag->vertices[c].deps[0], a);
        CHECK_INT_EQ(dag->vertices[a].reader_count, 1);
        CHECK_INT_EQ(dag->vertices[c].position, 1);
        CHECK_INT_EQ(dag->stages[c].input_count, 1);
        CHECK_STR_EQ(dag->stages[c].inputs[0].option, "data");
        CHECK(dag->stages[c].inputs[0].producer == &dag->stages[a]);
        CHECK_STR_EQ(dag->stages[c].kind->name, "use");
        CHECK_INT_EQ(dag->stages[c].mark.line, 2);
        CHECK_INT_EQ(dag->stages[c].mark.col, 3);
    }
    em_dag_free(dag);
    em_node_free(root);
}

static void test_no_edges_keeps_recipe_order(void) {
    const char *text = "stages:\n  z: {kind: src}\n  y: {kind: src}\n  x: {kind: weights}\n";
    em_dag *dag;
    em_node *root;
    char *message = build(text, &dag, &root);
    CHECK(message == NULL);
    char buf[64];
    if (dag) CHECK_STR_EQ(order_text(dag, buf, sizeof buf), "z y x");
    em_dag_free(dag);
    em_node_free(root);
}

static void test_lists_after_and_repeats(void) {
    /* A list option naming the same stage twice is two inputs but one edge; `after:` adds an
     * edge without an input; a list option may also be a single name. */
    const char *text = "stages:\n"
                       "  out: {kind: agg, inputs: [s1, s2, s1], after: [w]}\n"
                       "  s2: {kind: use, data: d, extra: w}\n"
                       "  s1: {kind: use, data: d, extra: [d, w], after: s2}\n"
                       "  d: {kind: src}\n"
                       "  w: {kind: weights}\n";
    em_dag *dag;
    em_node *root;
    char *message = build(text, &dag, &root);
    CHECK(message == NULL);
    if (dag) {
        char buf[256];
        CHECK_STR_EQ(order_text(dag, buf, sizeof buf), "d w s2 s1 out");
        long out = em_dag_find(dag, "out"), s1 = em_dag_find(dag, "s1");
        long s2 = em_dag_find(dag, "s2"), d = em_dag_find(dag, "d"), w = em_dag_find(dag, "w");
        CHECK_INT_EQ(dag->stages[out].input_count, 3);
        CHECK_INT_EQ(em_stage_input_count(&dag->stages[out], "inputs"), 3);
        CHECK(em_stage_input_producer(&dag->stages[out], "inputs", 2) == &dag->stages[s1]);
        CHECK_INT_EQ(dag->vertices[out].dep_count, 3); /* s1, s2, w */
        CHECK_INT_EQ(dag->vertices[out].read_count, 2);
        CHECK_INT_EQ(dag->vertices[out].after_count, 1);
        CHECK_INT_EQ(dag->vertices[out].after[0], w);
        CHECK_INT_EQ(dag->vertices[s1].dep_count, 3); /* s2 (after), d, w */
        CHECK_INT_EQ(dag->vertices[s1].read_count, 2);
        CHECK_INT_EQ(dag->vertices[d].reader_count, 2);  /* s1 and s2 */
        CHECK_INT_EQ(dag->vertices[w].reader_count, 2);  /* s1 and s2; not out (after only) */
        CHECK_INT_EQ(dag->vertices[s2].reader_count, 1); /* out; not s1 (after only) */
        CHECK_INT_EQ(dag->vertices[s1].reader_count, 1);
        CHECK_INT_EQ(em_stage_input_count(&dag->stages[s1], "extra"), 2);
        CHECK_INT_EQ(em_stage_input_count(&dag->stages[s2], "extra"), 1);
    }
    em_dag_free(dag);
    em_node_free(root);
}

static void test_cycles(void) {
    expect_error("stages:\n"
                 "  a: {kind: src, after: c}\n"
                 "  b: {kind: src, after: a}\n"
                 "  c: {kind: src, after: b}\n",
                 "test.yaml:2:3: cycle: a -> b -> c -> a");
    expect_error("stages:\n  solo: {kind: src, after: solo}\n",
                 "test.yaml:2:3: cycle: solo -> solo");
    /* A stage downstream of the cycle is not part of it; the shortest cycle is named. */
    expect_error("stages:\n"
                 "  tail: {kind: agg, inputs: [u]}\n"
                 "  u: {kind: use, data: d}\n"
                 "  d: {kind: src, after: [x, u]}\n"
                 "  x: {kind: src, after: d}\n",
                 "test.yaml:3:3: cycle: u -> d -> u");
}

static void test_reference_errors(void) {
    expect_error("stages:\n  a: {kind: src}\n  c: {kind: use, data: aa}\n",
                 "test.yaml:3:24: stage 'c': option 'data' names 'aa', which is not a stage "
                 "(did you mean 'a'?)");
    expect_error("stages:\n  a: {kind: src}\n  c: {kind: use, data: a, after: [a, nothing]}\n",
                 "test.yaml:3:38: stage 'c': option 'after' names 'nothing', which is not a "
                 "stage");
    expect_error("stages:\n  a: {kind: src}\n  c: {kind: use, data: a}\n  m: {kind: agg, "
                 "inputs: [c, a]}\n",
                 "test.yaml:4:30: stage 'm': option 'inputs' names 'a', a dataset stage, but "
                 "needs scores");
    expect_error("stages:\n  w: {kind: weights}\n  c: {kind: use, data: w}\n",
                 "test.yaml:3:24: stage 'c': option 'data' names 'w', a model stage, but needs "
                 "dataset");
    expect_error("stages:\n  a: {kind: src}\n  m: {kind: agg, inputs: [a2]}\n",
                 "test.yaml:3:27: stage 'm': option 'inputs' names 'a2', which is not a stage "
                 "(did you mean 'a'?)");
    /* a type only the kinds know: checked like the others */
    expect_error("stages:\n  a: {kind: src}\n  g: {kind: gadget, part: a}\n",
                 "test.yaml:3:27: stage 'g': option 'part' names 'a', a dataset stage, but needs "
                 "widget");
    expect_error("stages:\n  a: {kind: src}\n  c: {kind: use, data: a, extra: [s]}\n"
                 "  s: {kind: use, data: a}\n",
                 "test.yaml:3:35: stage 'c': option 'extra' names 's', a scores stage, but needs "
                 "dataset or model");
    expect_error("stages:\n  a: {kind: src}\n  c: {kind: use, extra: a}\n",
                 "test.yaml:3:3: stage 'c': missing option 'data' (the dataset stage to read)");
    expect_error("stages:\n  a: {kind: src}\n  c: {kind: use, data: [a]}\n",
                 "test.yaml:3:24: stage 'c': option 'data' names one stage, not a list");
    expect_error("stages:\n  a: {kind: src}\n  c: {kind: use, data: 7}\n",
                 "test.yaml:3:24: stage 'c': option 'data' must name a stage (or list stage "
                 "names), not an integer");
    expect_error("stages:\n  a: {kind: src}\n  m: {kind: agg, inputs: [a, {x: 1}]}\n",
                 "test.yaml:3:30: stage 'm': option 'inputs' must list stage names, but item 2 "
                 "is a map");
}

static void test_stage_errors(void) {
    expect_error("stages:\n  a: {kind: srcc}\n",
                 "test.yaml:2:13: stage 'a': unknown kind 'srcc' (did you mean 'src'?)");
    expect_error("stages:\n  a: {kind: zzzzzz}\n",
                 "test.yaml:2:13: stage 'a': unknown kind 'zzzzzz' (known kinds: agg, cmeet, "
                 "coll, fail, gadget, meet, picky, src, typo, use, verdict, weights, widget)");
    expect_error("stages:\n  a: {value: 3}\n",
                 "test.yaml:2:6: stage 'a': missing 'kind' (the stage kind to run; see evalmesh "
                 "stages)");
    expect_error("stages:\n  a: {kind: [src]}\n",
                 "test.yaml:2:13: stage 'a': 'kind' must be a string, not a list");
    expect_error("stages:\n  a: src\n",
                 "test.yaml:2:6: stage 'a' must be a map of options (with a 'kind'), not a string");
    expect_error("stages:\n  9lives: {kind: src}\n",
                 "test.yaml:2:3: stage name '9lives' is not valid: use letters, digits and '_', "
                 "not starting with a digit");
    expect_error("stages:\n  my-stage: {kind: src}\n",
                 "test.yaml:2:3: stage name 'my-stage' is not valid: use letters, digits and '_', "
                 "not starting with a digit");
    expect_error("stages: {}\n", "test.yaml:1:9: 'stages' is empty: a recipe needs at least one "
                                 "stage");
    expect_error("stages: [a]\n", "test.yaml:1:9: 'stages' must be a map from stage names to "
                                  "stages, not a list");
}

/* A kind whose input accepts a type no kind produces is a bug in evalmesh, found when a recipe
 * uses it; a type only some kinds know needs nothing from the runner. */
static void test_open_artifact_types(void) {
    em_node *root;
    em_dag *dag = NULL;
    em_status err =
        em_dag_build(parse_recipe("stages:\n  t: {kind: typo}\n", &root), em_stage_kinds, &dag);
    CHECK(err != NULL && dag == NULL);
    CHECK_INT_EQ(err ? err->exit_code : 0, EM_EXIT_FAILURE);
    CHECK_STR_EQ(err ? err->message : NULL,
                 "stage kind 'typo': input 'x' accepts 'nonesuch', which no stage kind produces");
    em_error_free(err);
    em_node_free(root);

    char *message =
        build("stages:\n  g: {kind: gadget, part: w}\n  w: {kind: widget}\n", &dag, &root);
    CHECK(message == NULL);
    free(message);
    char buf[64];
    if (dag) CHECK_STR_EQ(order_text(dag, buf, sizeof buf), "w g");
    em_dag_free(dag);
    em_node_free(root);
}

int main(void) {
    test_order_and_ties();
    test_no_edges_keeps_recipe_order();
    test_lists_after_and_repeats();
    test_cycles();
    test_reference_errors();
    test_open_artifact_types();
    test_stage_errors();
    return test_finish();
}
