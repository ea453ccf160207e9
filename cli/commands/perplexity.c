/* `evalmesh perplexity -m MODEL -f TEXT ...`: the llama-perplexity command line for evalmesh.
 * The recipe is the template recipes/perplexity.yaml, or with --kl-divergence REF_MODEL
 * recipes/perplexity_kld.yaml (MODEL against REF_MODEL through a compare stage); both are built
 * into the binary. The command line fills the template in with overrides, one recipe path per
 * option (the tables below), and it runs like `evalmesh run` does, on every rank of an
 * mpirun/srun job; --print-recipe shows the filled-in recipe as YAML instead, ready to save and
 * edit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/resume.h"
#include "cli/template_command.h"
#include "util/log.h"

static const char usage[] =
    "usage: evalmesh perplexity -m MODEL -f TEXT [--protocol chunked|sliding|rolling] [-c N]\n"
    "                           [--stride N] [--chunks N] [--threads N] [--precision P]\n"
    "                           [--no-mmap] [--print-recipe]\n"
    "                           [--kl-divergence REF_MODEL]\n"
    "                           [--run-dir DIR] [--force] [--log-level LEVEL]\n"
    "                           [--collective-timeout S]\n"
    "       evalmesh perplexity --resume RUN_DIR\n"
    "\n"
    "Token perplexity of MODEL (GGUF, safetensors or a Hugging Face folder) on the text file\n"
    "TEXT, as a recipe of five stages (model, dataset, forward, aggregate, report) run on this\n"
    "rank or on every rank of an mpirun/srun job. Prints the metrics table and, like\n"
    "llama-perplexity, \"Final estimate: PPL = X +/- Y\"; results.json is in the run directory.\n"
    "The recipe is recipes/perplexity.yaml with the options below filled in.\n"
    "\n"
    "With --kl-divergence REF_MODEL (llama-perplexity's --kl-divergence-base and\n"
    "--kl-divergence in one run, without a logits file), MODEL is scored against REF_MODEL:\n"
    "both stay resident and every window runs through both on the same rank. The text is\n"
    "tokenized by REF_MODEL, and a MODEL whose tokenizer gives any token id another meaning is\n"
    "refused (exit 2, naming the first difference). It prints llama-perplexity's statistics:\n"
    "PPL of both, ln(PPL(Q)/PPL(base)), KL divergence mean, percentiles and extremes, the\n"
    "change of the target token's probability (dp) and the share of tokens whose top token\n"
    "agrees, the same bits on any number of ranks; the recipe is recipes/perplexity_kld.yaml.\n"
    "\n"
    "  -m, --model MODEL   the model file or folder\n"
    "  -f, --file TEXT     the text (one document; with --protocol rolling, paragraphs\n"
    "                      separated by blank lines are the documents)\n"
    "  --protocol P        chunked (default: llama.cpp's), sliding (Hugging Face's guide) or\n"
    "                      rolling (lm-evaluation-harness's loglikelihood_rolling)\n"
    "  -c, --ctx-size N    tokens per chunk or window (default 512; 0: the model's context\n"
    "                      length, as llama-perplexity)\n"
    "  --stride N          sliding only: tokens between window starts (default N/2)\n"
    "  --chunks N          score only the first N chunks or windows (default: all)\n"
    "  -t, --threads N     forward threads per rank (default: cores / ranks on the node)\n"
    "  --precision P       exact (default), ggml (activations rounded to 8 bits before the\n"
    "                      products of Q8_0/Q4_0/Q4_1/Q5_0/Q5_1, Q2_K..Q6_K and IQ matrices,\n"
    "                      to fp16 before those of F16 ones, as llama.cpp's CPU backend) or\n"
    "                      bf16 (weights and activations of every product rounded to BF16,\n"
    "                      FP32 sums); the forward's `precision`;\n"
    "                      not with --kl-divergence\n"
    "  --no-mmap           read the weights into memory of their own in 2 MiB pages\n"
    "                      instead of mapping the file (llama.cpp's --no-mmap): faster where\n"
    "                      reading the weights bounds the speed, one copy per rank (both\n"
    "                      models' with --kl-divergence; the model stages' `mmap: false`)\n"
    "  --kl-divergence REF_MODEL  score MODEL against the reference REF_MODEL (see above)\n"
    "  --print-recipe      print the recipe as YAML and exit\n"
    "  --run-dir DIR       write into DIR instead of runs/perplexity-<UTC time>\n"
    "  --force             write into a --run-dir that is not empty\n"
    "  --log-level L       error, warn, info or debug\n"
    "  --collective-timeout S  seconds a collective may wait for the other ranks before\n"
    "                      the run fails with exit status 5 (default 300)\n"
    "  --resume RUN_DIR    finish an interrupted run (as evalmesh run --resume RUN_DIR)\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad arguments or input, 4 a stage failed, 5 another rank failed,\n"
    "6 interrupted by SIGTERM, SIGINT or SIGUSR1 (finish it with --resume).\n";

/* What each protocol's options fill in the template: -c sets `ctx`, --stride `stride` (NULL:
 * the protocol has none, and --stride is refused); `edits` are further overrides (the template's
 * options this protocol does not read are dropped, so the printed recipe shows only its own). */
typedef struct ppl_protocol {
    const char *name;
    const char *ctx;
    const char *stride;
    const char *edits[3];
} ppl_protocol;

static const ppl_protocol protocols[] = {
    {"chunked", "stages.data.n_ctx", NULL, {"~stages.data.max_length", "~stages.data.stride"}},
    {"sliding", "stages.data.max_length", "stages.data.stride", {"~stages.data.n_ctx"}},
    {"rolling",
     "stages.data.max_length",
     NULL,
     {"~stages.data.n_ctx", "~stages.data.stride", "stages.data.split=blank_line"}},
};

enum {
    OPT_PROTOCOL = 256,
    OPT_STRIDE,
    OPT_CHUNKS,
    OPT_PRINT,
    OPT_RUN_DIR,
    OPT_FORCE,
    OPT_LEVEL,
    OPT_RESUME,
    OPT_TIMEOUT,
    OPT_KLD,
    OPT_PRECISION,
    OPT_NO_MMAP
};

static const struct option options[] = {
    {"model", required_argument, NULL, 'm'},
    {"file", required_argument, NULL, 'f'},
    {"protocol", required_argument, NULL, OPT_PROTOCOL},
    {"ctx-size", required_argument, NULL, 'c'},
    {"stride", required_argument, NULL, OPT_STRIDE},
    {"chunks", required_argument, NULL, OPT_CHUNKS},
    {"threads", required_argument, NULL, 't'},
    {"print-recipe", no_argument, NULL, OPT_PRINT},
    {"run-dir", required_argument, NULL, OPT_RUN_DIR},
    {"force", no_argument, NULL, OPT_FORCE},
    {"log-level", required_argument, NULL, OPT_LEVEL},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"collective-timeout", required_argument, NULL, OPT_TIMEOUT},
    {"kl-divergence", required_argument, NULL, OPT_KLD},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"no-mmap", no_argument, NULL, OPT_NO_MMAP},
    {NULL, 0, NULL, 0},
};

/* The recipe paths of the options that name files or plain values (NULL: the template's). */
static const struct {
    int option;
    const char *path;
} option_paths[] = {
    {'m', "stages.model.path"},
    {'f', "stages.data.path"},
    {OPT_KLD, "stages.base.path"},
    {OPT_CHUNKS, "stages.data.max_windows"},
    {'t', NULL},
    {OPT_TIMEOUT, "collective_timeout_s"},
    {OPT_PRECISION, "stages.ppl.precision"},
};

/* The two templates: plain perplexity, and --kl-divergence's comparison with a reference. */
typedef struct ppl_template {
    const char *file;    /* under recipes/, built into the binary */
    const char *threads; /* the path --threads fills */
} ppl_template;

static const ppl_template perplexity_template = {"perplexity.yaml", "stages.ppl.threads"};
static const ppl_template kld_template = {"perplexity_kld.yaml", "stages.kld.threads"};

/* A number argument of option c (>= min), or an error message and -1. */
static long long number(int c, const char *text, long long min) {
    const char *name = "?";
    for (const struct option *o = options; o->name; o++)
        if (o->val == c) name = o->name;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || v < min) {
        em_log_error("evalmesh perplexity: --%s needs a %s integer, not '%s'", name,
                     min > 0 ? "positive" : "non-negative", text);
        return -1;
    }
    return v;
}

typedef struct ppl_args {
    const char *values[sizeof option_paths / sizeof *option_paths];
    const ppl_template *template; /* kld_template when --kl-divergence is given */
    const ppl_protocol *protocol;
    long long ctx, stride; /* -1: not given */
    const char *resume;    /* --resume RUN_DIR */
    bool in_memory;        /* --no-mmap */
} ppl_args;

/* Checks the combination and turns it into overrides; returns 0 or the exit status. */
static int make_overrides(const ppl_args *a, em_override_list *l) {
    const ppl_protocol *p = a->protocol;
    if (a->stride >= 0 && !p->stride) {
        em_log_error("evalmesh perplexity: --stride applies to --protocol sliding only, not %s "
                     "(whose windows do not overlap)",
                     p->name);
        return EM_EXIT_BAD_INPUT;
    }
    long long stride = a->stride;
    if (p->stride && stride < 0 && a->ctx == 0) {
        em_log_error("evalmesh perplexity: -c 0 with --protocol sliding needs --stride (the "
                     "window length is the model's, unknown before it loads)");
        return EM_EXIT_BAD_INPUT;
    }
    if (p->stride && stride < 0 && a->ctx > 0) stride = a->ctx / 2 > 0 ? a->ctx / 2 : 1;
    for (size_t i = 0; i < sizeof option_paths / sizeof *option_paths; i++) {
        if (option_paths[i].option == OPT_PRECISION && a->values[i] &&
            a->template == &kld_template) {
            em_log_error("evalmesh perplexity: --precision applies without --kl-divergence (the "
                         "comparison runs both models exact)");
            return EM_EXIT_BAD_INPUT;
        }
    }
    for (size_t i = 0; i < 3 && p->edits[i]; i++) em_override_add(l, em_xstrdup(p->edits[i]));
    em_override_add(l, em_xasprintf("stages.data.protocol=%s", p->name));
    if (a->ctx >= 0) em_override_add(l, em_xasprintf("%s=%lld", p->ctx, a->ctx));
    if (stride >= 0) em_override_add(l, em_xasprintf("%s=%lld", p->stride, stride));
    if (a->in_memory) em_override_add(l, em_xstrdup("stages.model.mmap=false"));
    if (a->in_memory && a->template == &kld_template)
        em_override_add(l, em_xstrdup("stages.base.mmap=false"));
    for (size_t i = 0; i < sizeof option_paths / sizeof *option_paths; i++) {
        if (!a->values[i]) continue;
        int option = option_paths[i].option;
        bool is_file = option == 'm' || option == 'f' || option == OPT_KLD;
        const char *path = option_paths[i].path ? option_paths[i].path : a->template->threads;
        /* Absolute paths when the file is there, so a printed recipe works from anywhere. */
        char *real = is_file ? realpath(a->values[i], NULL) : NULL;
        char *value = is_file ? em_yaml_quoted(real ? real : a->values[i]) : NULL;
        em_override_add(l, em_xasprintf("%s=%s", path, value ? value : a->values[i]));
        free(value);
        free(real);
    }
    return 0;
}

/* Parses argv into a, the session options and print_recipe; returns 0 or the exit status of a
 * bad argument. */
static int parse(int argc, char **argv, ppl_args *a, em_session_options *opts, bool *print_recipe) {
    int c;
    while ((c = em_cli_option("perplexity", argc, argv, "m:f:c:t:", options)) != -1) {
        size_t slot = sizeof option_paths / sizeof *option_paths;
        for (size_t i = 0; i < slot; i++)
            if (option_paths[i].option == c) slot = i;
        if (c == '?') return EM_EXIT_BAD_INPUT;
        if (slot < sizeof option_paths / sizeof *option_paths) {
            if ((c == 't' || c == OPT_CHUNKS) && number(c, optarg, 1) < 0) return EM_EXIT_BAD_INPUT;
            a->values[slot] = optarg;
        } else if (c == OPT_PROTOCOL) {
            a->protocol = NULL;
            for (size_t i = 0; i < sizeof protocols / sizeof *protocols; i++)
                if (strcmp(protocols[i].name, optarg) == 0) a->protocol = &protocols[i];
            if (!a->protocol) {
                em_log_error("evalmesh perplexity: unknown protocol '%s' (chunked, sliding, "
                             "rolling)",
                             optarg);
                return EM_EXIT_BAD_INPUT;
            }
        } else if (c == 'c') {
            if ((a->ctx = number(c, optarg, 0)) < 0) return EM_EXIT_BAD_INPUT;
        } else if (c == OPT_STRIDE) {
            if ((a->stride = number(c, optarg, 1)) < 0) return EM_EXIT_BAD_INPUT;
        } else if (c == OPT_PRINT) {
            *print_recipe = true;
        } else if (c == OPT_RUN_DIR) {
            opts->run_dir = optarg;
        } else if (c == OPT_FORCE) {
            opts->force = true;
        } else if (c == OPT_NO_MMAP) {
            a->in_memory = true;
        } else if (c == OPT_RESUME) {
            a->resume = optarg;
        } else if (c == OPT_LEVEL) {
            int level = em_log_level_parse(optarg);
            if (level < 0) {
                em_log_error("evalmesh perplexity: unknown log level '%s' (error, warn, info, "
                             "debug)",
                             optarg);
                return EM_EXIT_BAD_INPUT;
            }
            em_log_set_level((em_log_level)level);
        }
    }
    if (optind < argc) return em_cli_unexpected("perplexity", argv[optind]);
    if (a->resume) return 0;
    if (!a->values[0] || !a->values[1]) {
        em_log_error("evalmesh perplexity: needs -m MODEL and -f TEXT (see evalmesh perplexity "
                     "--help)");
        return EM_EXIT_BAD_INPUT;
    }
    for (size_t i = 0; i < sizeof option_paths / sizeof *option_paths; i++)
        if (option_paths[i].option == OPT_KLD && a->values[i]) a->template = &kld_template;
    return 0;
}

static int perplexity_main(int argc, char **argv) {
    ppl_args a = {
        .protocol = &protocols[0], .template = &perplexity_template, .ctx = -1, .stride = -1};
    em_session_options opts = {0};
    bool print_recipe = false;
    int code = parse(argc, argv, &a, &opts, &print_recipe);
    if (!code && a.resume) return em_cli_resume(a.resume);
    em_override_list overrides = {0};
    if (!code) code = make_overrides(&a, &overrides);
    if (code) {
        em_override_list_free(&overrides);
        return code;
    }
    return em_cli_run_template(a.template->file, "perplexity", &overrides, print_recipe, &opts,
                               argc, argv);
}

const em_command em_command_perplexity = {
    .name = "perplexity",
    .summary = "token perplexity of a model on a text file, like llama-perplexity",
    .usage = usage,
    .main = perplexity_main,
};
