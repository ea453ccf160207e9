/* Initialising and running the stages of a graph on a small thread pool (see executor.h). */
#include "runner/executor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/stop.h"

enum { PENDING, RUNNING, DONE, FAILED };

/* What the workers share; every field below `lock` is guarded by it. */
typedef struct schedule {
    em_dag *dag;
    const em_run_context *ctx;
    em_rank_state *rank_state;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned char *status; /* per stage: PENDING ... FAILED */
    size_t *readers_left;  /* per stage: readers of its artifact that have not finished */
    em_status *errors;     /* per stage: its failure, if any */
    size_t running;
    size_t finished; /* DONE or FAILED */
    int stop;        /* a stage failed: start nothing more */
} schedule;

static void free_artifact(em_stage *stage) {
    if (stage->output.free && stage->output.data) stage->output.free(stage->output.data);
    memset(&stage->output, 0, sizeof stage->output);
}

/* An error that names its place (an option's file:line:col) is kept as it is; another gets the
 * stage's place. Init errors are bad input unless the stage said otherwise. */
static em_status init_error(const em_stage *stage, em_status err) {
    if (err->exit_code != EM_EXIT_DISTRIBUTED) err->exit_code = EM_EXIT_BAD_INPUT;
    if (err->mark.file) return err;
    return em_error_prefix_at(err, stage->mark, "stage '%s' (%s)", stage->name, stage->kind->name);
}

em_status em_executor_init(em_dag *dag, const em_run_context *ctx) {
    for (size_t k = 0; k < dag->count; k++) {
        em_stage *stage = &dag->stages[dag->order[k]];
        if (!stage->kind->init) continue;
        em_status err = stage->kind->init(stage, ctx);
        if (!err) continue;
        if (stage->state && stage->kind->destroy) stage->kind->destroy(stage); /* partial state */
        stage->state = NULL;
        for (size_t back = 0; back < k; back++) {
            em_stage *done = &dag->stages[dag->order[back]];
            if (done->kind->destroy) done->kind->destroy(done);
            done->state = NULL;
        }
        return init_error(stage, err);
    }
    return NULL;
}

/* Stage i may start: it waits for nothing, and when it calls collectives every earlier collective
 * stage (in topological order) has finished. */
static int ready(const schedule *s, size_t i) {
    const em_dag *dag = s->dag;
    if (s->status[i] != PENDING) return 0;
    const em_dag_vertex *v = &dag->vertices[i];
    for (size_t d = 0; d < v->dep_count; d++)
        if (s->status[v->deps[d]] != DONE) return 0;
    if (!dag->stages[i].kind->collective) return 1;
    for (size_t k = 0; k < v->position; k++) {
        size_t j = dag->order[k];
        if (dag->stages[j].kind->collective && (s->status[j] == PENDING || s->status[j] == RUNNING))
            return 0;
    }
    return 1;
}

/* A stage will never read its inputs (it finished): release them; the indices of
 * artifacts nobody reads any more are appended to release (freed by the caller, unlocked). */
static void release_reads(schedule *s, size_t i, size_t *release, size_t *release_count) {
    const em_dag_vertex *v = &s->dag->vertices[i];
    for (size_t r = 0; r < v->read_count; r++) {
        size_t p = v->reads[r];
        if (--s->readers_left[p] == 0 && s->status[p] == DONE) release[(*release_count)++] = p;
    }
}

/* A failure keeps its exit status 2 (bad input), 5 (distributed) or 6 (interrupted); any other
 * is a runtime failure (4). Only a failed verdict (verdict true) has status 3. */
static em_status run_error(const schedule *s, const em_stage *stage, em_status err, bool verdict) {
    /* A rank asked to stop that then finds a collective broken (a peer stopped by the same
     * SIGTERM aborted it) was interrupted like that peer, not failed. */
    int sig = em_stop_signal();
    if (err->exit_code == EM_EXIT_DISTRIBUTED && sig) {
        err->exit_code = EM_EXIT_INTERRUPTED;
        err = em_error_prefix(err, "interrupted by signal %d (%s) while in a collective", sig,
                              strsignal(sig));
    }
    if (verdict)
        err->exit_code = EM_EXIT_GATE;
    else if (err->exit_code != EM_EXIT_BAD_INPUT && err->exit_code != EM_EXIT_DISTRIBUTED &&
             err->exit_code != EM_EXIT_INTERRUPTED)
        err->exit_code = EM_EXIT_RUNTIME;
    return em_error_prefix(err, "rank %d, stage '%s' (%s)", s->ctx->rank, stage->name,
                           stage->kind->name);
}

static void *worker(void *arg) {
    schedule *s = arg;
    em_dag *dag = s->dag;
    size_t *release = em_xmalloc(dag->count * sizeof *release);
    pthread_mutex_lock(&s->lock);
    for (;;) {
        if (s->stop || s->finished == dag->count) break;
        size_t i = dag->count;
        for (size_t k = 0; k < dag->count && i == dag->count; k++)
            if (ready(s, dag->order[k])) i = dag->order[k];
        if (i == dag->count) {
            if (s->running == 0) break; /* nothing runs, nothing can start: only after a stop */
            pthread_cond_wait(&s->changed, &s->lock);
            continue;
        }
        em_stage *stage = &dag->stages[i];
        s->status[i] = RUNNING;
        s->running++;
        if (s->rank_state) em_rank_state_stage(s->rank_state, stage->name, "running");
        em_log_debug("stage '%s' (%s) started", stage->name, stage->kind->name);
        pthread_mutex_unlock(&s->lock);

        double start = em_clock_seconds();
        em_status err = stage->kind->run ? stage->kind->run(stage, s->ctx) : NULL;
        double seconds = em_clock_seconds() - start;

        pthread_mutex_lock(&s->lock);
        size_t release_count = 0;
        stage->seconds = seconds;
        s->running--;
        s->finished++;
        if (err) {
            s->status[i] = FAILED;
            s->errors[i] = run_error(s, stage, err, false);
            s->stop = 1;
        } else {
            s->status[i] = DONE;
            if (stage->verdict_failure && stage->kind->verdict) /* deferred to the end */
                s->errors[i] = run_error(s, stage, stage->verdict_failure, true);
            else if (stage->verdict_failure)
                em_error_free(stage->verdict_failure);
            stage->verdict_failure = NULL;
            stage->output.type = stage->kind->produces;
            /* the same on every rank: shown by rank 0, by the others at debug level */
            em_log(s->ctx->rank == 0 ? EM_LOG_INFO : EM_LOG_DEBUG, "stage '%s' (%s) done in %.3f s",
                   stage->name, stage->kind->name, seconds);
        }
        if (s->rank_state)
            em_rank_state_stage(s->rank_state, stage->name,
                                !s->errors[i]                                    ? "done"
                                : s->errors[i]->exit_code == EM_EXIT_INTERRUPTED ? "interrupted"
                                                                                 : "failed");
        release_reads(s, i, release, &release_count);
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
        for (size_t r = 0; r < release_count; r++) free_artifact(&dag->stages[release[r]]);
        pthread_mutex_lock(&s->lock);
    }
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    free(release);
    return NULL;
}

/* The error to return: the first failure in topological order that stopped the run, else the
 * first failed verdict. The others are logged here, once. */
static em_status pick_error(schedule *s) {
    const em_dag *dag = s->dag;
    long chosen = -1;
    for (int pass = 0; pass < 2 && chosen < 0; pass++)
        for (size_t k = 0; k < dag->count && chosen < 0; k++) {
            size_t i = dag->order[k];
            if (s->errors[i] && (pass == 1 || s->errors[i]->exit_code != EM_EXIT_GATE))
                chosen = (long)i;
        }
    for (size_t k = 0; k < dag->count; k++) {
        size_t i = dag->order[k];
        if (!s->errors[i] || (long)i == chosen) continue;
        em_log_error("%s", s->errors[i]->message);
        em_error_free(s->errors[i]);
    }
    return chosen < 0 ? NULL : s->errors[chosen];
}

em_status em_executor_run(em_dag *dag, const em_run_context *ctx, int threads,
                          em_rank_state *rank_state) {
    schedule s = {.dag = dag, .ctx = ctx, .rank_state = rank_state};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.changed, NULL);
    s.status = em_xcalloc(dag->count, sizeof *s.status);
    s.readers_left = em_xcalloc(dag->count, sizeof *s.readers_left);
    s.errors = em_xcalloc(dag->count, sizeof *s.errors);
    for (size_t i = 0; i < dag->count; i++) s.readers_left[i] = dag->vertices[i].reader_count;

    if (threads <= 0) threads = 4;
    if ((size_t)threads > dag->count) threads = (int)dag->count;
    pthread_t *pool = em_xcalloc((size_t)threads, sizeof *pool);
    int started = 0;
    for (int t = 0; t < threads; t++) {
        if (pthread_create(&pool[t], NULL, worker, &s) != 0) break;
        started++;
    }
    if (started == 0) worker(&s); /* no thread could be made: run them here, one by one */
    for (int t = 0; t < started; t++) pthread_join(pool[t], NULL);
    free(pool);

    em_status err = pick_error(&s);
    free(s.status);
    free(s.readers_left);
    free(s.errors);
    pthread_cond_destroy(&s.changed);
    pthread_mutex_destroy(&s.lock);
    return err;
}

void em_executor_finish(em_dag *dag) {
    for (size_t k = dag->count; k-- > 0;) {
        em_stage *stage = &dag->stages[dag->order[k]];
        free_artifact(stage);
        if (stage->kind->destroy) stage->kind->destroy(stage);
        stage->state = NULL;
    }
}
