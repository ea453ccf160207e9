/* Stage kinds that exist only in the runner's unit tests, and the registry they form. They record
 * what happens (runs, frees, collectives) in an event log the tests compare with what the
 * executor promises: order, overlap, one collective at a time, artifacts freed after their last
 * reader. Artifacts carry one integer so results can be checked for any thread count. */
#ifndef EVALMESH_TEST_KINDS_H
#define EVALMESH_TEST_KINDS_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner/recipe/recipe.h"
#include "runner/stage.h"

/* ---- the event log: "run:a", "free:a", "coll:c" in the order they happened ---- */

#define MAX_EVENTS 256
static char events[MAX_EVENTS][48];
static int event_count;
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;

static inline void record(const char *what, const char *name) {
    pthread_mutex_lock(&event_lock);
    if (event_count < MAX_EVENTS) snprintf(events[event_count++], 48, "%s:%s", what, name);
    pthread_mutex_unlock(&event_lock);
}

/* The events starting with prefix, joined by spaces (into buf). */
static inline const char *events_with(const char *prefix, char *buf, size_t size) {
    buf[0] = 0;
    pthread_mutex_lock(&event_lock);
    for (int i = 0; i < event_count; i++) {
        if (strncmp(events[i], prefix, strlen(prefix)) != 0) continue;
        if (buf[0]) strncat(buf, " ", size - strlen(buf) - 1);
        strncat(buf, events[i], size - strlen(buf) - 1);
    }
    pthread_mutex_unlock(&event_lock);
    return buf;
}

static inline void reset_events(void) {
    pthread_mutex_lock(&event_lock);
    event_count = 0;
    pthread_mutex_unlock(&event_lock);
}

/* ---- artifacts: one integer and the producing stage's name ---- */

typedef struct test_value {
    char name[32];
    long long value;
} test_value;

static void free_value(void *data) {
    test_value *v = data;
    record("free", v->name);
    free(v);
}

static void set_output(em_stage *self, long long value) {
    test_value *v = em_xcalloc(1, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", self->name);
    v->value = value;
    self->output = (em_artifact){.data = v, .free = free_value};
}

static long long input_value(const em_stage *self, const char *option, size_t index) {
    const em_artifact *a = em_stage_input_artifact(self, option, index);
    return a && a->data ? ((const test_value *)a->data)->value : -1000000;
}

/* src: produces a dataset holding its `value` option (default 1). */
static em_status src_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    set_output(self, em_node_get_int(self->options, "value", 1));
    return NULL;
}
static const em_stage_kind test_src = {
    .name = "src", .summary = "test: a dataset", .produces = "dataset", .run = src_run};

/* weights: produces a model holding its `value` option (default 2). */
static em_status weights_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    set_output(self, em_node_get_int(self->options, "value", 2));
    return NULL;
}
static const em_stage_kind test_weights = {
    .name = "weights", .summary = "test: a model", .produces = "model", .run = weights_run};

/* use: scores = 10 * data + the sum of `extra` (datasets or models). */
static const em_input_spec use_inputs[] = {
    {"data", {"dataset"}, false, false},
    {"extra", {"dataset", "model"}, true, true},
    {0},
};
static em_status use_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    long long v = 10 * input_value(self, "data", 0);
    for (size_t i = 0; i < em_stage_input_count(self, "extra"); i++)
        v += input_value(self, "extra", i);
    set_output(self, v);
    return NULL;
}
static const em_stage_kind test_use = {.name = "use",
                                       .summary = "test: scores from a dataset",
                                       .produces = "scores",
                                       .inputs = use_inputs,
                                       .run = use_run};

/* agg: metrics = sum over its `inputs` of (position + 1) * value. */
static const em_input_spec agg_inputs[] = {
    {"inputs", {"scores"}, true, false},
    {0},
};
static em_status agg_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    long long v = 0;
    for (size_t i = 0; i < em_stage_input_count(self, "inputs"); i++)
        v += (long long)(i + 1) * input_value(self, "inputs", i);
    set_output(self, v);
    return NULL;
}
static const em_stage_kind test_agg = {.name = "agg",
                                       .summary = "test: metrics from scores",
                                       .produces = "metrics",
                                       .inputs = agg_inputs,
                                       .run = agg_run};

/* ---- meeting: stages that only finish when `expect` of them are running at the same time ---- */

static double meet_timeout_s = 10;
static int meet_arrived;
static pthread_mutex_t meet_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t meet_cond = PTHREAD_COND_INITIALIZER;

static inline void reset_meeting(double timeout_s) {
    pthread_mutex_lock(&meet_lock);
    meet_arrived = 0;
    meet_timeout_s = timeout_s;
    pthread_mutex_unlock(&meet_lock);
}

static em_status meet_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    int expect = (int)em_node_get_int(self->options, "expect", 2);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    long long ns = (long long)(meet_timeout_s * 1e9) + deadline.tv_nsec;
    deadline.tv_sec += (time_t)(ns / 1000000000);
    deadline.tv_nsec = (long)(ns % 1000000000);
    pthread_mutex_lock(&meet_lock);
    meet_arrived++;
    pthread_cond_broadcast(&meet_cond);
    int timed_out = 0;
    while (meet_arrived < expect && !timed_out)
        timed_out = pthread_cond_timedwait(&meet_cond, &meet_lock, &deadline) == ETIMEDOUT;
    pthread_mutex_unlock(&meet_lock);
    set_output(self, 0);
    if (timed_out) return em_error_new(EM_EXIT_RUNTIME, "nobody came to the meeting");
    return NULL;
}
static const em_stage_kind test_meet = {.name = "meet",
                                        .summary = "test: waits for another stage to run too",
                                        .produces = "report",
                                        .run = meet_run};
static const em_stage_kind test_cmeet = {.name = "cmeet",
                                         .summary = "test: meet, as a collective stage",
                                         .produces = "report",
                                         .collective = true,
                                         .run = meet_run};

/* ---- collectives: count how many run at once ---- */

static int coll_active, coll_max_active;

static em_status coll_run(em_stage *self, const em_run_context *ctx) {
    pthread_mutex_lock(&event_lock);
    coll_active++;
    if (coll_active > coll_max_active) coll_max_active = coll_active;
    pthread_mutex_unlock(&event_lock);
    record("coll", self->name);
    struct timespec pause = {0, 20 * 1000 * 1000}; /* gives another collective time to overlap */
    nanosleep(&pause, NULL);
    pthread_mutex_lock(&event_lock);
    coll_active--;
    pthread_mutex_unlock(&event_lock);
    set_output(self, 0);
    return NULL;
}
static const em_stage_kind test_coll = {.name = "coll",
                                        .summary = "test: a collective stage",
                                        .produces = "mesh",
                                        .collective = true,
                                        .run = coll_run};

/* ---- failures ---- */

/* fail: run fails with exit status `code` (default 4). */
static em_status fail_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    return em_error_new((int)em_node_get_int(self->options, "code", 4), "boom");
}
static const em_stage_kind test_fail = {
    .name = "fail", .summary = "test: fails", .produces = "report", .run = fail_run};

/* verdict: a gate whose verdict fails, reading optional metrics; with `code` 2 its run fails
 * instead (bad input). */
static const em_input_spec verdict_inputs[] = {
    {"metrics", {"metrics"}, false, true},
    {0},
};
static em_status verdict_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    set_output(self, 0);
    int code = (int)em_node_get_int(self->options, "code", EM_EXIT_GATE);
    em_status failure = em_error_new(code, "ppl 9.1 > max 8.9");
    if (code == EM_EXIT_BAD_INPUT) return failure;
    self->verdict_failure = failure;
    return NULL;
}
static const em_stage_kind test_verdict = {.name = "verdict",
                                           .summary = "test: a failing gate",
                                           .produces = "verdict",
                                           .verdict = true,
                                           .inputs = verdict_inputs,
                                           .run = verdict_run};

/* picky: init keeps state and rejects `level` above 3, naming the option's place, and says
 * no without a place when `reject` is true. */
static em_status picky_init(em_stage *self, const em_run_context *ctx) {
    record("init", self->name);
    self->state = em_xstrdup(self->name);
    if (em_node_get_bool(self->options, "reject", false))
        return em_error_new(EM_EXIT_BAD_INPUT, "no thanks");
    const em_node *level = em_node_get(self->options, "level");
    if (level && em_node_get_int(self->options, "level", 0) > 3)
        return em_error_at(EM_EXIT_RUNTIME, level->mark, "stage '%s': level must be at most 3",
                           self->name);
    return NULL;
}
static void picky_destroy(em_stage *self) {
    record("destroy", self->name);
    free(self->state);
}
static const em_stage_kind test_picky = {.name = "picky",
                                         .summary = "test: checks its options in init",
                                         .produces = "env",
                                         .init = picky_init,
                                         .run = src_run,
                                         .destroy = picky_destroy};

/* ---- an artifact type the runner has never heard of ---- */

/* widget: produces a "widget" holding its `value` option (default 7). */
static const em_stage_kind test_widget = {
    .name = "widget", .summary = "test: a new artifact type", .produces = "widget", .run = src_run};

/* gadget: reads a widget (`part`); its scores are the widget's value + 1. */
static const em_input_spec gadget_inputs[] = {
    {"part", {"widget"}, false, false},
    {0},
};
static em_status gadget_run(em_stage *self, const em_run_context *ctx) {
    record("run", self->name);
    set_output(self, input_value(self, "part", 0) + 1);
    return NULL;
}
static const em_stage_kind test_gadget = {.name = "gadget",
                                          .summary = "test: reads a widget",
                                          .produces = "scores",
                                          .inputs = gadget_inputs,
                                          .run = gadget_run};

/* typo: accepts a type no kind produces (a bug in a kind). */
static const em_input_spec typo_inputs[] = {
    {"x", {"widget", "nonesuch"}, false, true},
    {0},
};
static const em_stage_kind test_typo = {.name = "typo",
                                        .summary = "test: a kind with a typo",
                                        .produces = "env",
                                        .inputs = typo_inputs};

/* The registry of the tests, sorted by name like the generated one (runner/stage.c's lookup
 * uses this name). */
const em_stage_kind *const em_stage_kinds[] = {
    &test_agg, &test_cmeet, &test_coll, &test_fail,    &test_gadget,  &test_meet,   &test_picky,
    &test_src, &test_typo,  &test_use,  &test_verdict, &test_weights, &test_widget, NULL,
};

/* Parses a recipe text (named test.yaml in marks) and returns its `stages:` map. */
static inline em_node *parse_recipe(const char *text, em_node **root) {
    em_status err = em_yaml_parse(text, strlen(text), "test.yaml", root);
    if (err) {
        fprintf(stderr, "test recipe does not parse: %s\n", err->message);
        exit(1);
    }
    return em_node_get(*root, "stages");
}

#endif
