/* The stage seam. A stage kind is one file in stages/ that fills one em_stage_kind named
 * em_stage_kind_<file name> (the registry is generated from the file names). The runner never
 * names a kind: it finds the kind by the recipe's `kind:`, validates the stage's options against
 * schemas/stages/<kind>.schema.json (applying defaults), resolves the options listed in `inputs`
 * to other stages (those references, plus `after:`, are the DAG edges), then calls init on every
 * stage, run in topological order on every rank, and destroy at the end.
 *
 * Artifacts are typed values owned by the runner; each stage produces one, and the runner frees
 * it (with its `free`) after the last consumer ran. An artifact type is a name ("model",
 * "metrics", ...) that the producing kind gives in `produces`; the layout of the data is that
 * kind's public header. Consumers accept types by name, so a kind with a new type of artifact
 * adds nothing to the runner. */
#ifndef EVALMESH_STAGE_H
#define EVALMESH_STAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "runner/recipe/node.h"
#include "util/error.h"

struct em_comm;
struct em_mesh;

typedef struct em_artifact {
    const char *type;         /* the producing kind's `produces` (set by the runner after run) */
    void *data;               /* owned; the layout is the producing kind's public header */
    void (*free)(void *data); /* NULL when nothing to free */
} em_artifact;

/* The most artifact types one input may accept. */
#define EM_INPUT_MAX_TYPES 4

/* One option of a stage that refers to other stages by instance name. */
typedef struct em_input_spec {
    const char *option;                      /* the option key, e.g. "model" */
    const char *accepts[EM_INPUT_MAX_TYPES]; /* type names the producer may have; NULL ends */
    bool is_list;  /* the option is a list of stage names (else one name) */
    bool optional; /* the option may be absent */
} em_input_spec;

/* Whether spec accepts artifacts of type `type`. */
bool em_input_accepts(const em_input_spec *spec, const char *type);
/* The type names spec accepts joined by " or " ("scores or metrics"), into buf. */
const char *em_input_accepts_text(const em_input_spec *spec, char *buf, size_t size);

/* A resolved input: which stage an option names, and its artifact once that stage has run. */
typedef struct em_stage_input {
    const char *option;
    size_t index; /* position in a list option, 0 otherwise */
    struct em_stage *producer;
} em_stage_input;

/* What every rank knows about the run, given to each stage. */
typedef struct em_run_context {
    int rank;                /* in the world, 0-based */
    int world_size;          /* ranks in the run */
    int local_rank;          /* rank among the ranks on this node */
    int local_size;          /* ranks on this node */
    int node_id;             /* 0-based index of this rank's node */
    int node_count;          /* nodes in the run */
    struct em_comm *world;   /* CPU communicator over all ranks (local or mpi backend) */
    const char *run_dir;     /* where stages write files: set in run; NULL in init, validate */
    const char *recipe_name; /* the recipe's `name:` */
    const em_node *recipe;   /* the whole resolved recipe (after includes, overrides, defaults) */
    long long seed;          /* the recipe's `seed:` */
    double collective_timeout_s; /* limit for every collective */
    /* `--resume`: stages may take what an earlier attempt in run_dir recorded (the forward's
     * window records, stages/metrics/window_records.h) instead of computing it again */
    bool resume;
    const char *recipe_sha256; /* of recipe.resolved.yaml's text; set in run, NULL before */
    /* The default mesh (dp = world size, tp = cp = 1, the world's backend) for stages whose
     * recipe names no mesh stage; NULL in validate. Stages reach it through em_stage_mesh. */
    struct em_mesh *mesh;
} em_run_context;

typedef struct em_stage em_stage;
typedef struct em_stage_kind em_stage_kind;

struct em_stage {
    const char *name; /* the instance name in the recipe */
    const em_stage_kind *kind;
    em_node *options;       /* the stage's map, validated, defaults applied (runner owns) */
    em_mark mark;           /* where the stage is defined */
    em_stage_input *inputs; /* resolved references, in the order of the kind's specs */
    size_t input_count;
    void *state;               /* the kind's private state, set by init, freed by destroy */
    em_artifact output;        /* set by run */
    double seconds;            /* wall time of run on this rank */
    em_status verdict_failure; /* set by run of a verdict kind: see em_stage_kind.verdict */
};

struct em_stage_kind {
    const char *name;            /* the `kind:` value; equals the file name */
    const char *summary;         /* one line for `evalmesh stages` */
    const char *produces;        /* the artifact type's name: "model", "metrics", ... */
    const em_input_spec *inputs; /* terminated by an entry with option == NULL; may be NULL */
    /* The stage calls collectives on some communicator. Such stages run one at a time in the
     * same (topological) order on every rank; stages without collectives may run concurrently. */
    bool collective;
    /* The stage may end in a failed verdict (a gate): its run sets self->verdict_failure and
     * returns NULL, so its artifact is kept and every other stage still runs (also those that
     * read the verdict, e.g. a report that records it); the run ends with exit status 3 and that
     * message after everything else finished. An error run returns is a breakdown like any
     * stage's. */
    bool verdict;
    /* The stage writes the run's results where a person or a program reads them (files, pushes):
     * a recipe without such a stage computes and keeps nothing, which the runner warns about. */
    bool writes_results;
    /* Parse and check options; no heavy work, no files read beyond what checking needs. Errors
     * name the option's place (em_error_at with the node's mark), exit status 2. May be NULL. */
    em_status (*init)(em_stage *self, const em_run_context *ctx);
    /* Do the work on this rank; fill self->output. Inputs are available through
     * em_stage_input_artifact. Errors name rank and stage (the runner adds the prefix). */
    em_status (*run)(em_stage *self, const em_run_context *ctx);
    /* Free self->state (the output artifact is freed by the runner). May be NULL. */
    void (*destroy)(em_stage *self);
};

/* The artifact of the stage named by `option` (entry `index` of a list option), or NULL when the
 * option is absent. Only valid during run. */
const em_artifact *em_stage_input_artifact(const em_stage *self, const char *option, size_t index);
/* How many stages a (list) option names; 0 when absent. */
size_t em_stage_input_count(const em_stage *self, const char *option);
/* The producing stage of an input (for its name, e.g. to key metrics). */
const em_stage *em_stage_input_producer(const em_stage *self, const char *option, size_t index);

/* The input file a stage's option names, resolved by the recipe path rule (util/paths.h) into
 * *path (the caller frees it), when it exists and can be read: a regular file, or also a
 * directory when dir_ok. Otherwise an error (exit status 2) at the option's file:line:col,
 * "stage 'NAME': OPTION PATH: REASON". Kinds call it from init, so a missing input fails
 * `evalmesh validate` and stops a run before its run directory exists. */
em_status em_stage_input_file(const em_stage *self, const char *option, bool dir_ok, char **path);
/* The mesh a stage works on: the artifact of its `mesh` option's stage, else the run's default
 * world mesh (ctx->mesh). Stages call collectives only through this mesh's groups. */
struct em_mesh *em_stage_mesh(const em_stage *self, const em_run_context *ctx);
/* The name of that mesh for messages: the mesh stage's name, or "the default world mesh". */
const char *em_stage_mesh_name(const em_stage *self);

/* The registry generated from the files stages/kinds/<kind>.c: NULL-terminated, sorted by name. */
extern const em_stage_kind *const em_stage_kinds[];
/* The kind called name in the NULL-terminated registry kinds (em_stage_kinds, or a test's), or
 * NULL. */
const em_stage_kind *em_stage_kind_find(const em_stage_kind *const *kinds, const char *name);

#endif
