/* `evalmesh perplexity -m MODEL -f TEXT ...`: the llama-perplexity command line for evalmesh.
 * It builds the equivalent recipe in memory (model -> dataset -> forward -> aggregate -> report)
 * and runs it like `evalmesh run` does, on every rank of an mpirun/srun job;
 * --print-recipe shows that recipe as YAML instead, ready to save and edit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "runner/session.h"
#include "util/log.h"
#include "stages/data/protocol.h"

static const char usage[] =
    "usage: evalmesh perplexity -m MODEL -f TEXT [--protocol chunked|sliding|rolling] [-c N]\n"
    "                           [--stride N] [--chunks N] [--threads N] [--print-recipe]\n"
    "                           [--run-dir DIR] [--force] [--log-level LEVEL]\n"
    "\n"
    "Token perplexity of MODEL (GGUF, safetensors or a Hugging Face folder) on the text file\n"
    "TEXT, as a recipe of five stages (model, dataset, forward, aggregate, report) run on this\n"
    "rank or on every rank of an mpirun/srun job. Prints the metrics table and, like\n"
    "llama-perplexity, \"Final estimate: PPL = X +/- Y\"; results.json is in the run directory.\n"
    "\n"
    "  -m, --model MODEL   the model file or folder\n"
    "  -f, --file TEXT     the text (one document; with --protocol rolling, paragraphs\n"
    "                      separated by blank lines are the documents)\n"
    "  --protocol P        chunked (default: llama.cpp's), sliding (Hugging Face's guide) or\n"
    "                      rolling (lm-evaluation-harness's loglikelihood_rolling)\n"
    "  -c, --ctx-size N    tokens per chunk or window (default 512)\n"
    "  --stride N          sliding: tokens between window starts (default N/2)\n"
    "  --chunks N          score only the first N chunks or windows (default: all)\n"
    "  --threads N         forward threads per rank (default: cores / ranks on the node)\n"
    "  --print-recipe      print the recipe as YAML and exit\n"
    "  --run-dir DIR       write into DIR instead of runs/perplexity-<UTC time>\n"
    "  --force             write into a --run-dir that is not empty\n"
    "  --log-level L       error, warn, info or debug\n"
    "\n"
    "Exit statuses: 0 ok, 2 bad arguments or input, 4 a stage failed, 5 another rank failed.\n";

static const em_mark here = {"<evalmesh perplexity>", 0, 0};

static em_node *scalar(const char *text) {
    return em_node_new_scalar(text, false, here);
}

static em_node *quoted(const char *text) {
    return em_node_new_scalar(text, true, here);
}

static em_node *integer(long long v) {
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    return scalar(text);
}

static void set(em_node *map, const char *key, em_node *value) {
    em_node_map_set(map, key, here, value);
}

static em_node *stage(em_node *stages, const char *name, const char *kind) {
    em_node *s = em_node_new_map(here);
    set(s, "kind", scalar(kind));
    set(stages, name, s);
    return s;
}

typedef struct ppl_args {
    const char *model, *text, *protocol;
    long long ctx, stride, chunks, threads;
} ppl_args;

/* The recipe: the same tree `evalmesh run` would load from the printed YAML. */
static em_node *build_recipe(const ppl_args *a) {
    em_node *root = em_node_new_map(here);
    set(root, "name", scalar("perplexity"));
    em_node *stages = em_node_new_map(here);
    set(root, "stages", stages);

    em_node *model = stage(stages, "model", "model");
    set(model, "path", quoted(a->model));

    em_node *data = stage(stages, "data", "dataset");
    set(data, "tokenizer", scalar("model"));
    set(data, "path", quoted(a->text));
    set(data, "format", scalar("text"));
    set(data, "protocol", scalar(a->protocol));
    if (strcmp(a->protocol, "chunked") == 0) {
        set(data, "n_ctx", integer(a->ctx));
    } else {
        set(data, "max_length", integer(a->ctx));
    }
    if (strcmp(a->protocol, "sliding") == 0)
        set(data, "stride", integer(a->stride > 0 ? a->stride : a->ctx / 2));
    if (strcmp(a->protocol, "rolling") == 0) set(data, "split", scalar("blank_line"));
    if (a->chunks > 0) set(data, "max_windows", integer(a->chunks));

    em_node *forward = stage(stages, "ppl", "forward");
    set(forward, "model", scalar("model"));
    set(forward, "data", scalar("data"));
    if (a->threads > 0) set(forward, "threads", integer(a->threads));

    em_node *agg = stage(stages, "metrics", "aggregate");
    em_node *inputs = em_node_new_seq(here);
    em_node_seq_append(inputs, scalar("ppl"));
    set(agg, "inputs", inputs);
    set(agg, "print_estimate", scalar("true"));

    em_node *report = stage(stages, "report", "report");
    set(report, "metrics", scalar("metrics"));
    em_node *outputs = em_node_new_seq(here);
    em_node_seq_append(outputs, scalar("table"));
    em_node_seq_append(outputs, scalar("json"));
    set(report, "outputs", outputs);
    return root;
}

/* A positive integer argument, or an error message and -1. */
static long long positive(const char *flag, const char *text) {
    char *end;
    long long v = strtoll(text, &end, 10);
    if (*end || v <= 0) {
        em_log_error("evalmesh perplexity: %s needs a positive integer, not '%s'", flag, text);
        return -1;
    }
    return v;
}

static int perplexity_main(int argc, char **argv) {
    ppl_args a = {.protocol = "chunked", .ctx = 512};
    em_session_options opts = {0};
    bool print_recipe = false;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long *number = NULL;
        if (strcmp(f, "--print-recipe") == 0) {
            print_recipe = true;
            continue;
        } else if (strcmp(f, "--force") == 0) {
            opts.force = true;
            continue;
        }
        if (!v) {
            em_log_error("evalmesh perplexity: %s needs a value (see evalmesh perplexity --help)",
                         f);
            return EM_EXIT_BAD_INPUT;
        }
        i++;
        if (strcmp(f, "-m") == 0 || strcmp(f, "--model") == 0) {
            a.model = v;
        } else if (strcmp(f, "-f") == 0 || strcmp(f, "--file") == 0) {
            a.text = v;
        } else if (strcmp(f, "--protocol") == 0) {
            if (em_protocol_parse(v) < 0) {
                em_log_error("evalmesh perplexity: unknown protocol '%s' (chunked, sliding, "
                             "rolling)",
                             v);
                return EM_EXIT_BAD_INPUT;
            }
            a.protocol = v;
        } else if (strcmp(f, "-c") == 0 || strcmp(f, "--ctx-size") == 0) {
            number = &a.ctx;
        } else if (strcmp(f, "--stride") == 0) {
            number = &a.stride;
        } else if (strcmp(f, "--chunks") == 0) {
            number = &a.chunks;
        } else if (strcmp(f, "--threads") == 0 || strcmp(f, "-t") == 0) {
            number = &a.threads;
        } else if (strcmp(f, "--run-dir") == 0) {
            opts.run_dir = v;
        } else if (strcmp(f, "--log-level") == 0) {
            int level = em_log_level_parse(v);
            if (level < 0) {
                em_log_error("evalmesh perplexity: unknown log level '%s'", v);
                return EM_EXIT_BAD_INPUT;
            }
            em_log_set_level((em_log_level)level);
        } else {
            em_log_error("evalmesh perplexity: unknown option '%s' (see evalmesh perplexity "
                         "--help)",
                         f);
            return EM_EXIT_BAD_INPUT;
        }
        if (number && (*number = positive(f, v)) < 0) return EM_EXIT_BAD_INPUT;
    }
    if (!a.model || !a.text) {
        em_log_error("evalmesh perplexity: needs -m MODEL and -f TEXT (see evalmesh perplexity "
                     "--help)");
        return EM_EXIT_BAD_INPUT;
    }
    /* Absolute paths, so a printed recipe works from wherever it is saved. */
    char *model = realpath(a.model, NULL), *text = realpath(a.text, NULL);
    if (model) a.model = model;
    if (text) a.text = text;
    em_node *recipe = build_recipe(&a);
    free(model);
    free(text);
    if (print_recipe) {
        printf("# yaml-language-server: $schema=../schemas/recipe.schema.json\n");
        em_node_write_yaml(recipe, stdout);
        em_node_free(recipe);
        return EM_EXIT_OK;
    }
    em_pipeline *pipeline = NULL;
    em_status err = em_pipeline_from_tree(recipe, "perplexity", NULL, 0, &pipeline);
    return em_session_run(err, pipeline, &opts);
}

const em_command em_command_perplexity = {
    .name = "perplexity",
    .summary = "token perplexity of a model on a text file, like llama-perplexity",
    .usage = usage,
    .main = perplexity_main,
};
