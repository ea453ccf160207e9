/* `evalmesh eval -m MODEL --tasks T1,T2 ...`: lm-evaluation-harness's command line for evalmesh.
 * The recipe is the template recipes/eval.yaml (built into the binary): a model stage, a task
 * stage and a report; the command line fills it in with overrides, one recipe path per option,
 * and it runs like `evalmesh run` does, on every rank of an mpirun/srun job; --print-recipe
 * shows the filled-in recipe as YAML instead. --gen-kwargs takes lm-eval's comma-separated
 * key=value list for generate_until tasks: max_gen_toks and until (the task stage's options of
 * those names), do_sample=false and temperature=0; sampling is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/resume.h"
#include "cli/template_command.h"
#include "util/log.h"

static const char usage[] =
    "usage: evalmesh eval -m MODEL --tasks TASK[,TASK...] [--num-fewshot N] [--limit N]\n"
    "                     [--max-length N] [--add-bos] [--log-samples] [--fewshot-seed N]\n"
    "                     [--threads N] [--batch-tokens N] [--precision P]\n"
    "                     [--gen-kwargs K=V[,K=V...]] [--bigbench-generative]\n"
    "                     [--no-mmap] [--print-recipe]\n"
    "                     [--run-dir DIR] [--force] [--log-level LEVEL]\n"
    "                     [--collective-timeout S]\n"
    "       evalmesh eval --resume RUN_DIR\n"
    "\n"
    "Scores MODEL (GGUF, safetensors or a Hugging Face folder) on benchmark tasks as\n"
    "lm-evaluation-harness 0.4 does, from log-likelihoods (multiple_choice and loglikelihood\n"
    "tasks) or greedy generation (generate_until), on this rank or on every rank of an\n"
    "mpirun/srun job, the same bits on any number of ranks. Prints lm-eval's table; the run "
    "directory gets lm_eval_results.json (lm-eval's\n"
    "results document), results.json and, with --log-samples, samples_<task>.jsonl. The recipe\n"
    "is recipes/eval.yaml with the options below filled in.\n"
    "\n"
    "  -m, --model MODEL   the model file or folder\n"
    "  --tasks LIST        comma-separated: task YAMLs in lm-eval's format over local JSON\n"
    "                      Lines (*.yaml), BIG-bench task.json files or folders, BIG-bench\n"
    "                      task or group names (`evalmesh tasks` lists them)\n"
    "  --num-fewshot N     few-shot examples per prompt (default: each task's own)\n"
    "  --limit N           only the first N examples of each task\n"
    "  --max-length N      most tokens per request (default: the model's context length)\n"
    "  --add-bos           encode requests with BOS (default: as the tokenizer says)\n"
    "  --log-samples       write samples_<task>.jsonl (lm-eval's --log_samples)\n"
    "  --fewshot-seed N    the few-shot sampler's seed (default 1234, lm-eval's)\n"
    "  -t, --threads N     threads per rank (default: cores / ranks on the node)\n"
    "  --batch-tokens N    most positions per batch of requests\n"
    "  --precision P       exact (default), ggml (activations rounded to 8 bits before the\n"
    "                      products of quantized matrices, to fp16 before F16 ones, as\n"
    "                      llama.cpp's CPU backend) or bf16 (weights and activations rounded\n"
    "                      to BF16, FP32 sums); the task\n"
    "                      stage's `precision`; recorded, a resume keeps it\n"
    "  --gen-kwargs LIST   for generate_until tasks, lm-eval's comma-separated key=value:\n"
    "                      max_gen_toks=N (the most tokens generated), until=STR (a stop\n"
    "                      string; repeat the key for more; replaces the tasks' own),\n"
    "                      do_sample=false, temperature=0 (decoding is greedy; sampling is\n"
    "                      refused)\n"
    "  --bigbench-generative  also BIG-bench's generative tasks (exact_str_match), decoded\n"
    "                      greedily (default: left out of folders and groups)\n"
    "  --no-mmap           read the weights into memory of their own in 2 MiB pages\n"
    "                      instead of mapping the file (llama.cpp's --no-mmap): faster where\n"
    "                      reading the weights bounds the speed, one copy per rank (the\n"
    "                      model stage's `mmap: false`)\n"
    "  --print-recipe      print the recipe as YAML and exit\n"
    "  --run-dir DIR       write into DIR instead of runs/eval-<UTC time>\n"
    "  --force             write into a --run-dir that is not empty\n"
    "  --log-level L       error, warn, info or debug\n"
    "  --collective-timeout S  seconds a collective may wait for the other ranks\n"
    "  --resume RUN_DIR    finish an interrupted run on any number of ranks: the requests\n"
    "                      its records hold are not scored again\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad arguments or input (a task file names file:line:col),\n"
    "4 a stage failed, 5 another rank failed, 6 interrupted.\n";

enum {
    OPT_TASKS = 256,
    OPT_SHOTS,
    OPT_LIMIT,
    OPT_MAX_LENGTH,
    OPT_BOS,
    OPT_SAMPLES,
    OPT_NO_MMAP,
    OPT_SEED,
    OPT_BATCH,
    OPT_PRECISION,
    OPT_GEN_KWARGS,
    OPT_BIGBENCH_GENERATIVE,
    OPT_PRINT,
    OPT_RUN_DIR,
    OPT_FORCE,
    OPT_LEVEL,
    OPT_TIMEOUT,
    OPT_RESUME,
};

static const struct option options[] = {
    {"model", required_argument, NULL, 'm'},
    {"tasks", required_argument, NULL, OPT_TASKS},
    {"num-fewshot", required_argument, NULL, OPT_SHOTS},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"max-length", required_argument, NULL, OPT_MAX_LENGTH},
    {"add-bos", no_argument, NULL, OPT_BOS},
    {"log-samples", no_argument, NULL, OPT_SAMPLES},
    {"no-mmap", no_argument, NULL, OPT_NO_MMAP},
    {"fewshot-seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, 't'},
    {"batch-tokens", required_argument, NULL, OPT_BATCH},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"gen-kwargs", required_argument, NULL, OPT_GEN_KWARGS},
    {"bigbench-generative", no_argument, NULL, OPT_BIGBENCH_GENERATIVE},
    {"print-recipe", no_argument, NULL, OPT_PRINT},
    {"run-dir", required_argument, NULL, OPT_RUN_DIR},
    {"force", no_argument, NULL, OPT_FORCE},
    {"log-level", required_argument, NULL, OPT_LEVEL},
    {"collective-timeout", required_argument, NULL, OPT_TIMEOUT},
    {"resume", required_argument, NULL, OPT_RESUME},
    {NULL, 0, NULL, 0},
};

/* The options that are a number at a recipe path: the least value each takes. */
static const struct {
    int option;
    const char *path;
    long long min;
} number_paths[] = {
    {OPT_SHOTS, "stages.tasks.num_fewshot", 0},
    {OPT_LIMIT, "stages.tasks.limit", 1},
    {OPT_MAX_LENGTH, "stages.tasks.max_length", 2},
    {OPT_SEED, "stages.tasks.fewshot_seed", 0},
    {'t', "stages.tasks.threads", 1},
    {OPT_BATCH, "stages.tasks.batch_tokens", 1},
    {OPT_TIMEOUT, "collective_timeout_s", 1},
};

/* "stages.tasks.tasks=[...]" from the comma-separated list (paths of files made absolute, so a
 * printed recipe works from anywhere). */
static char *tasks_override(const char *list) {
    size_t cap = 64 + 8 * strlen(list);
    char *out = em_xmalloc(cap), *copy = em_xstrdup(list), *save = NULL;
    strcpy(out, "stages.tasks.tasks=[");
    bool first = true;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *real = strchr(t, '/') || strchr(t, '.') ? realpath(t, NULL) : NULL;
        char *q = em_yaml_quoted(real ? real : t);
        out = em_xrealloc(out, strlen(out) + strlen(q) + 4);
        if (!first) strcat(out, ", ");
        strcat(out, q);
        first = false;
        free(q);
        free(real);
    }
    strcat(out, "]");
    free(copy);
    return out;
}

/* --gen-kwargs LIST (lm-eval's "k=v,k=v") into the task stage's max_gen_toks and until
 * overrides; 0, or exit status 2 after saying why (sampling, an unknown key, a bad value). */
static int gen_kwargs_overrides(const char *list, em_override_list *overrides) {
    char *copy = em_xstrdup(list), *save = NULL, *until = em_xstrdup("");
    int rc = 0;
    for (char *kv = strtok_r(copy, ",", &save); kv && !rc; kv = strtok_r(NULL, ",", &save)) {
        char *value = strchr(kv, '=');
        if (!value) {
            em_log_error("evalmesh eval: --gen-kwargs '%s' is not key=value", kv);
            rc = EM_EXIT_BAD_INPUT;
            break;
        }
        *value++ = '\0';
        char *end;
        if (!strcmp(kv, "max_gen_toks")) {
            long long v = strtoll(value, &end, 10);
            if (!*value || *end || v < 1 || v > 1000000000) {
                em_log_error("evalmesh eval: --gen-kwargs max_gen_toks needs an integer of at "
                             "least 1, not '%s'",
                             value);
                rc = EM_EXIT_BAD_INPUT;
            } else {
                em_override_add(overrides, em_xasprintf("stages.tasks.max_gen_toks=%lld", v));
            }
        } else if (!strcmp(kv, "until")) {
            char *q = em_yaml_quoted(value);
            char *more = em_xasprintf("%s%s%s", until, *until ? ", " : "", q);
            free(q);
            free(until);
            until = more;
        } else if (!strcmp(kv, "do_sample")) {
            if (strcmp(value, "false") && strcmp(value, "False")) {
                em_log_error("evalmesh eval: --gen-kwargs do_sample=%s: evalmesh decodes "
                             "greedily, the same text on any number of ranks; sampling is not "
                             "supported (do_sample=false)",
                             value);
                rc = EM_EXIT_BAD_INPUT;
            }
        } else if (!strcmp(kv, "temperature")) {
            double t = strtod(value, &end);
            if (!*value || *end || t != 0) {
                em_log_error("evalmesh eval: --gen-kwargs temperature=%s: evalmesh decodes "
                             "greedily, the same text on any number of ranks; sampling is not "
                             "supported (temperature=0)",
                             value);
                rc = EM_EXIT_BAD_INPUT;
            }
        } else {
            em_log_error("evalmesh eval: --gen-kwargs key '%s' is not supported (max_gen_toks, "
                         "until, do_sample=false, temperature=0)",
                         kv);
            rc = EM_EXIT_BAD_INPUT;
        }
    }
    if (!rc && *until) em_override_add(overrides, em_xasprintf("stages.tasks.until=[%s]", until));
    free(until);
    free(copy);
    return rc;
}

typedef struct eval_args {
    em_override_list overrides;
    bool print_recipe, has_model, has_tasks;
    const char *resume; /* --resume RUN_DIR */
} eval_args;

/* Parses argv into a and the session options; returns 0 or the exit status of a bad argument. */
static int parse(int argc, char **argv, eval_args *a, em_session_options *opts) {
    int c;
    while ((c = em_cli_option("eval", argc, argv, "m:t:", options)) != -1) {
        if (c == '?') return EM_EXIT_BAD_INPUT;
        bool numbered = false;
        for (size_t i = 0; i < sizeof number_paths / sizeof *number_paths; i++) {
            if (number_paths[i].option != c) continue;
            char *end;
            long long v = strtoll(optarg, &end, 10);
            if (!*optarg || *end || v < number_paths[i].min) {
                const char *name = "?";
                for (const struct option *o = options; o->name; o++)
                    if (o->val == c) name = o->name;
                em_log_error("evalmesh eval: --%s needs an integer of at least %lld, not '%s'",
                             name, number_paths[i].min, optarg);
                return EM_EXIT_BAD_INPUT;
            }
            em_override_add(&a->overrides, em_xasprintf("%s=%lld", number_paths[i].path, v));
            numbered = true;
        }
        if (numbered) continue;
        if (c == 'm') {
            char *real = realpath(optarg, NULL), *q = em_yaml_quoted(real ? real : optarg);
            em_override_add(&a->overrides, em_xasprintf("stages.model.path=%s", q));
            free(real);
            free(q);
            a->has_model = true;
        } else if (c == OPT_TASKS) {
            em_override_add(&a->overrides, tasks_override(optarg));
            a->has_tasks = true;
        } else if (c == OPT_BOS) {
            em_override_add(&a->overrides, em_xstrdup("stages.tasks.add_bos=true"));
        } else if (c == OPT_PRECISION) {
            char *q = em_yaml_quoted(optarg);
            em_override_add(&a->overrides, em_xasprintf("stages.tasks.precision=%s", q));
            free(q);
        } else if (c == OPT_GEN_KWARGS) {
            int rc = gen_kwargs_overrides(optarg, &a->overrides);
            if (rc) return rc;
        } else if (c == OPT_BIGBENCH_GENERATIVE) {
            em_override_add(&a->overrides, em_xstrdup("stages.tasks.bigbench_generative=true"));
        } else if (c == OPT_NO_MMAP) {
            em_override_add(&a->overrides, em_xstrdup("stages.model.mmap=false"));
        } else if (c == OPT_SAMPLES) {
            em_override_add(&a->overrides, em_xstrdup("stages.tasks.log_samples=true"));
        } else if (c == OPT_RESUME) {
            a->resume = optarg;
        } else if (c == OPT_PRINT) {
            a->print_recipe = true;
        } else if (c == OPT_RUN_DIR) {
            opts->run_dir = optarg;
        } else if (c == OPT_FORCE) {
            opts->force = true;
        } else if (c == OPT_LEVEL) {
            int level = em_log_level_parse(optarg);
            if (level < 0) {
                em_log_error("evalmesh eval: unknown log level '%s' (error, warn, info, debug)",
                             optarg);
                return EM_EXIT_BAD_INPUT;
            }
            em_log_set_level((em_log_level)level);
        }
    }
    if (optind < argc) return em_cli_unexpected("eval", argv[optind]);
    if (a->resume) return 0;
    if (!a->has_model || !a->has_tasks) {
        em_log_error("evalmesh eval: needs -m MODEL and --tasks TASKS (see evalmesh eval --help)");
        return EM_EXIT_BAD_INPUT;
    }
    return 0;
}

static int eval_main(int argc, char **argv) {
    eval_args a = {0};
    em_session_options opts = {0};
    int code = parse(argc, argv, &a, &opts);
    if (code || a.resume) {
        em_override_list_free(&a.overrides);
        return code ? code : em_cli_resume(a.resume);
    }
    return em_cli_run_template("eval.yaml", "eval", &a.overrides, a.print_recipe, &opts, argc,
                               argv);
}

const em_command em_command_eval = {
    .name = "eval",
    .summary = "benchmark tasks (lm-eval YAML, BIG-bench) from log-likelihoods or greedy "
               "generation, like lm_eval",
    .usage = usage,
    .main = eval_main,
};
