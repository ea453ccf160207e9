/* Unit tests of the executor (runner/executor.c) with test-only stage kinds: results that do not
 * depend on the thread count, independent stages that really overlap, collective stages that
 * never do and keep topological order, artifacts freed right after their last reader, failures
 * that stop the run, verdicts (gates) that let the others finish, artifact types set by the
 * runner, init errors, and the rank state file. */
#include "test.h"
#include "test_kinds.h"

#include <sys/stat.h>
#include <unistd.h>

#include "runner/executor.h"
#include "util/log.h"

static const em_run_context context = {
    .rank = 0, .world_size = 1, .local_size = 1, .node_count = 1};

typedef struct prepared {
    em_node *root;
    em_dag *dag;
} prepared;

static prepared prepare(const char *text) {
    prepared p;
    em_node *stages = parse_recipe(text, &p.root);
    em_status err = em_dag_build(stages, em_stage_kinds, &p.dag);
    if (err) {
        fprintf(stderr, "test recipe does not build: %s\n", err->message);
        exit(1);
    }
    reset_events();
    return p;
}

static void release(prepared *p) {
    em_dag_free(p->dag);
    em_node_free(p->root);
}

static long long output_of(const prepared *p, const char *name) {
    const em_stage *s = &p->dag->stages[em_dag_find(p->dag, name)];
    return s->output.data ? ((const test_value *)s->output.data)->value : -1;
}

/* Runs an initialised graph and returns its error (NULL on success). */
static em_status run(prepared *p, int threads) {
    em_status err = em_executor_init(p->dag, &context);
    CHECK(err == NULL);
    if (err) return err;
    return em_executor_run(p->dag, &context, threads, NULL);
}

static void check_error(em_status err, int code, const char *message) {
    CHECK(err != NULL);
    if (!err) return;
    CHECK_INT_EQ(err->exit_code, code);
    CHECK_STR_EQ(err->message, message);
    em_error_free(err);
}

static void test_results_do_not_depend_on_threads(void) {
    const char *text = "stages:\n"
                       "  d1: {kind: src, value: 3}\n"
                       "  d2: {kind: src, value: 5}\n"
                       "  w: {kind: weights, value: 7}\n"
                       "  s1: {kind: use, data: d1, extra: [w, d2]}\n"
                       "  s2: {kind: use, data: d2, extra: [d1]}\n"
                       "  s3: {kind: use, data: d1}\n"
                       "  m: {kind: agg, inputs: [s2, s1, s3, s1]}\n";
    /* s1 = 30 + 7 + 5 = 42, s2 = 50 + 3 = 53, s3 = 30; m = 1*53 + 2*42 + 3*30 + 4*42 = 395 */
    for (int threads = 1; threads <= 8; threads++) {
        prepared p = prepare(text);
        CHECK(run(&p, threads) == NULL);
        CHECK_INT_EQ(output_of(&p, "m"), 395);
        char buf[512];
        events_with("run", buf, sizeof buf);
        CHECK_INT_EQ(strlen(buf), strlen("run:d1 run:d2 run:w run:s1 run:s2 run:s3 run:m"));
        CHECK(strstr(buf, "run:m") == buf + strlen(buf) - 5); /* m last: it reads s1..s3 */
        /* every artifact but m's (nobody reads it) is freed by now; m's at the end */
        events_with("free", buf, sizeof buf);
        CHECK_INT_EQ(strlen(buf), strlen("free:d1 free:d2 free:w free:s1 free:s2 free:s3"));
        CHECK(strstr(buf, "free:m") == NULL);
        em_executor_finish(p.dag);
        CHECK(strstr(events_with("free", buf, sizeof buf), "free:m") != NULL);
        release(&p);
    }
}

static void test_freeing_after_last_reader(void) {
    char buf[512];
    prepared p = prepare("stages:\n"
                         "  a: {kind: src}\n"
                         "  b: {kind: use, data: a}\n"
                         "  c: {kind: agg, inputs: [b]}\n");
    CHECK(run(&p, 1) == NULL);
    CHECK_STR_EQ(events_with("", buf, sizeof buf), "run:a run:b free:a run:c free:b");
    em_executor_finish(p.dag);
    CHECK_STR_EQ(events_with("", buf, sizeof buf), "run:a run:b free:a run:c free:b free:c");
    release(&p);

    /* Two readers: freed after the second. */
    p = prepare("stages:\n"
                "  a: {kind: src}\n"
                "  b1: {kind: use, data: a}\n"
                "  b2: {kind: use, data: a}\n");
    CHECK(run(&p, 1) == NULL);
    CHECK_STR_EQ(events_with("", buf, sizeof buf), "run:a run:b1 run:b2 free:a");
    em_executor_finish(p.dag);
    CHECK_STR_EQ(events_with("free", buf, sizeof buf), "free:a free:b2 free:b1");
    release(&p);
}

static void test_independent_stages_overlap(void) {
    /* Each meet stage only finishes once the other runs too: with two threads they meet. */
    reset_meeting(30);
    prepared p = prepare("stages:\n  m1: {kind: meet}\n  m2: {kind: meet}\n");
    CHECK(run(&p, 0) == NULL);
    em_executor_finish(p.dag);
    release(&p);

    /* With one thread they cannot: the first waits in vain and the run stops there. */
    reset_meeting(0.2);
    p = prepare("stages:\n  m1: {kind: meet}\n  m2: {kind: meet}\n");
    check_error(run(&p, 1), EM_EXIT_RUNTIME,
                "rank 0, stage 'm1' (meet): nobody came to the meeting");
    char buf[128];
    CHECK_STR_EQ(events_with("run", buf, sizeof buf), "run:m1");
    em_executor_finish(p.dag);
    release(&p);

    /* A collective stage and a non-collective one may overlap too. */
    reset_meeting(30);
    p = prepare("stages:\n  c: {kind: cmeet}\n  m: {kind: meet}\n");
    CHECK(run(&p, 4) == NULL);
    em_executor_finish(p.dag);
    release(&p);
}

static void test_collectives_one_at_a_time(void) {
    /* Two collective stages never run together, so they cannot meet. */
    reset_meeting(0.3);
    prepared p = prepare("stages:\n  c1: {kind: cmeet}\n  c2: {kind: cmeet}\n");
    check_error(run(&p, 4), EM_EXIT_RUNTIME,
                "rank 0, stage 'c1' (cmeet): nobody came to the meeting");
    em_executor_finish(p.dag);
    release(&p);

    /* Topological order is c1 x c2 y c3 c4: collectives run in that order, one at a time,
     * whatever the threads do. */
    for (int round = 0; round < 5; round++) {
        coll_active = coll_max_active = 0;
        p = prepare("stages:\n"
                    "  c1: {kind: coll}\n"
                    "  x: {kind: src}\n"
                    "  c2: {kind: coll}\n"
                    "  y: {kind: use, data: x}\n"
                    "  c3: {kind: coll, after: y}\n"
                    "  c4: {kind: coll}\n");
        CHECK(run(&p, 4) == NULL);
        char buf[256];
        CHECK_STR_EQ(events_with("coll", buf, sizeof buf), "coll:c1 coll:c2 coll:c3 coll:c4");
        CHECK_INT_EQ(coll_max_active, 1);
        em_executor_finish(p.dag);
        release(&p);
    }
}

static void test_failure_stops_the_run(void) {
    const char *text = "stages:\n"
                       "  a: {kind: src}\n"
                       "  f: {kind: fail}\n"
                       "  b: {kind: use, data: a}\n"
                       "  z: {kind: src}\n";
    prepared p = prepare(text);
    check_error(run(&p, 1), EM_EXIT_RUNTIME, "rank 0, stage 'f' (fail): boom");
    char buf[256];
    CHECK_STR_EQ(events_with("run", buf, sizeof buf), "run:a run:f");
    em_executor_finish(p.dag);
    CHECK_STR_EQ(events_with("free", buf, sizeof buf), "free:a");
    release(&p);

    /* A distributed failure keeps its status; an internal one becomes a runtime failure. */
    p = prepare("stages:\n  f: {kind: fail, code: 5}\n");
    check_error(run(&p, 2), EM_EXIT_DISTRIBUTED, "rank 0, stage 'f' (fail): boom");
    em_executor_finish(p.dag);
    release(&p);
    p = prepare("stages:\n  f: {kind: fail, code: 1}\n");
    check_error(run(&p, 2), EM_EXIT_RUNTIME, "rank 0, stage 'f' (fail): boom");
    em_executor_finish(p.dag);
    release(&p);

    /* Exit status 3 from a kind that is not a verdict is a failure like any other. */
    p = prepare("stages:\n  f: {kind: fail, code: 3}\n  z: {kind: src, after: f}\n"
                "  y: {kind: src}\n");
    check_error(run(&p, 1), EM_EXIT_RUNTIME, "rank 0, stage 'f' (fail): boom");
    CHECK_STR_EQ(events_with("run", buf, sizeof buf), "run:f");
    em_executor_finish(p.dag);
    release(&p);
}

static void test_gate_lets_the_others_finish(void) {
    prepared p = prepare("stages:\n"
                         "  a: {kind: src}\n"
                         "  g: {kind: verdict}\n"
                         "  after_g: {kind: src, after: g}\n"
                         "  b: {kind: use, data: a}\n"
                         "  m: {kind: agg, inputs: [b]}\n"
                         "  g2: {kind: verdict, metrics: m}\n");
    check_error(run(&p, 1), EM_EXIT_GATE, "rank 0, stage 'g' (verdict): ppl 9.1 > max 8.9");
    char buf[256];
    /* a failed verdict is deferred: the stages after it (a report recording it) still run */
    CHECK_STR_EQ(events_with("run", buf, sizeof buf), "run:a run:g run:after_g run:b run:m run:g2");
    em_executor_finish(p.dag);
    release(&p);

    /* A verdict's failure is exit status 3 whatever status its message came with. */
    p = prepare("stages:\n  g: {kind: verdict, code: 4}\n  a: {kind: src}\n");
    check_error(run(&p, 1), EM_EXIT_GATE, "rank 0, stage 'g' (verdict): ppl 9.1 > max 8.9");
    CHECK_STR_EQ(events_with("run", buf, sizeof buf), "run:g run:a");
    em_executor_finish(p.dag);
    release(&p);

    /* Bad input stops the run, also from a verdict stage. */
    p = prepare("stages:\n  g: {kind: verdict, code: 2}\n  a: {kind: src, after: g}\n");
    check_error(run(&p, 1), EM_EXIT_BAD_INPUT, "rank 0, stage 'g' (verdict): ppl 9.1 > max 8.9");
    CHECK_STR_EQ(events_with("run", buf, sizeof buf), "run:g");
    em_executor_finish(p.dag);
    release(&p);

    /* A runtime failure wins over a gate, whatever their order. */
    p = prepare("stages:\n  g: {kind: verdict}\n  f: {kind: fail}\n");
    check_error(run(&p, 1), EM_EXIT_RUNTIME, "rank 0, stage 'f' (fail): boom");
    em_executor_finish(p.dag);
    release(&p);
}

/* Artifacts carry the type their kind produces, set by the runner, also for a type only the
 * producing and the consuming kind know. */
static void test_artifact_types(void) {
    prepared p = prepare("stages:\n  w: {kind: widget, value: 41}\n  g: {kind: gadget, part: w}\n"
                         "  a: {kind: src}\n");
    CHECK(run(&p, 2) == NULL);
    CHECK_INT_EQ(output_of(&p, "g"), 42);
    CHECK_STR_EQ(p.dag->stages[em_dag_find(p.dag, "g")].output.type, "scores");
    CHECK_STR_EQ(p.dag->stages[em_dag_find(p.dag, "a")].output.type, "dataset");
    em_executor_finish(p.dag);
    release(&p);
}

static void test_init_errors(void) {
    prepared p = prepare("stages:\n"
                         "  p1: {kind: picky, level: 1}\n"
                         "  p2: {kind: picky, level: 5}\n");
    em_status err = em_executor_init(p.dag, &context);
    /* the place is the error's mark, kept as it is */
    CHECK(err && err->mark.line == 3 && err->mark.col == 28);
    check_error(err, EM_EXIT_BAD_INPUT, "test.yaml:3:28: stage 'p2': level must be at most 3");
    char buf[256];
    CHECK_STR_EQ(events_with("", buf, sizeof buf), "init:p1 init:p2 destroy:p2 destroy:p1");
    release(&p);

    /* A message without a place gets the stage's. */
    p = prepare("stages:\n  a: {kind: src}\n  p: {kind: picky, reject: true}\n");
    check_error(em_executor_init(p.dag, &context), EM_EXIT_BAD_INPUT,
                "test.yaml:3:3: stage 'p' (picky): no thanks");
    release(&p);

    p = prepare("stages:\n  p: {kind: picky, level: 2}\n");
    CHECK(em_executor_init(p.dag, &context) == NULL);
    CHECK(em_executor_run(p.dag, &context, 0, NULL) == NULL);
    em_executor_finish(p.dag);
    CHECK_STR_EQ(events_with("", buf, sizeof buf), "init:p run:p free:p destroy:p");
    release(&p);
}

static void test_rank_state(void) {
    char dir[] = "/tmp/evalmesh-test-executor-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    em_rank_state *state;
    CHECK(em_rank_state_open(dir, 0, 1, &state) == NULL);
    prepared p = prepare("stages:\n  a: {kind: src}\n  b: {kind: use, data: a}\n");
    CHECK(em_executor_init(p.dag, &context) == NULL);
    CHECK(em_executor_run(p.dag, &context, 1, state) == NULL);
    em_executor_finish(p.dag);
    release(&p);
    em_rank_state_close(state);
    char path[256], text[1024] = "";
    snprintf(path, sizeof path, "%s/state/rank-0.json", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
    }
    CHECK_CONTAINS(text, "\"stage\": \"b\", \"status\": \"done\"");
    unlink(path);
    snprintf(path, sizeof path, "%s/state", dir);
    rmdir(path);
    rmdir(dir);
}

int main(void) {
    em_log_set_level(EM_LOG_WARN); /* no "stage done" lines */
    test_results_do_not_depend_on_threads();
    test_freeing_after_last_reader();
    test_independent_stages_overlap();
    test_collectives_one_at_a_time();
    test_failure_stops_the_run();
    test_gate_lets_the_others_finish();
    test_artifact_types();
    test_init_errors();
    test_rank_state();
    return test_finish();
}
