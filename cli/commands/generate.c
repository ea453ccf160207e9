/* `evalmesh generate -m MODEL -p PROMPT... [-n N] [-t THREADS] [--until STR]... [--ids]`: the
 * greedy continuations of one or more prompts (stages/tasks/generate.h), decoded together on the
 * cpu forward backend, for a quick look at what a model writes and for tools/bench-generate's
 * figures (the line on stderr); on one process, tp = cp = 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/command.h"
#include "cli/options.h"
#include "util/clock.h"
#include "stages/kernels/cpu/llama_forward.h"
#include "stages/model/loaded_model.h"
#include "stages/tasks/generate.h"
#include "stages/tokenizer/tokenizer.h"

static const char USAGE[] =
    "usage: evalmesh generate -m MODEL -p PROMPT... [-n N] [-c N] [-t THREADS] [--until STR]...\n"
    "                         [--precision exact|ggml|bf16] [--no-mmap] [--ids]\n\n"
    "Prints the greedy continuation of PROMPT by MODEL (GGUF, safetensors or a Hugging Face\n"
    "folder): the prompt is tokenized with the model's tokenizer (BOS as its file says) and\n"
    "decoded with a key-value cache on the cpu forward, one token at a time, until EOS, one of\n"
    "the --until strings (the text is cut before it, as lm-evaluation-harness does) or N\n"
    "tokens. A prompt longer than the context less N keeps its last tokens. Several -p decode\n"
    "together, one step for all at a time; each continuation is printed in order, each the\n"
    "text it gets alone. stderr says how many tokens were generated in how long.\n\n"
    "  -m, --model MODEL   the model file or folder\n"
    "  -p, --prompt TEXT   a prompt (may be empty: BOS alone; repeatable)\n"
    "  -n, --max-tokens N  the most tokens to generate (default 64)\n"
    "  -c, --ctx-size N    positions of prompt and generated tokens together (default: the\n"
    "                      model's context length)\n"
    "  -t, --threads N     forward threads (default 1)\n"
    "  --until STR         stop when the generated text holds STR (repeatable)\n"
    "  --precision P       exact (default), ggml (activations rounded to 8 bits before the\n"
    "                      products of quantized matrices, to fp16 before F16 ones, as\n"
    "                      llama.cpp's CPU backend) or bf16 (weights and activations rounded\n"
    "                      to BF16, FP32 sums)\n"
    "  --no-mmap           read the weights into memory of their own in 2 MiB pages\n"
    "                      instead of mapping the file (llama.cpp's --no-mmap): faster where\n"
    "                      reading the weights bounds the speed, one copy per rank\n"
    "  --ids               print the generated token ids on a second line\n\n"
    "Exit statuses: 0 ok, 2 bad arguments or input (a model the forward cannot run, N not\n"
    "smaller than the context), 4 out of memory for the cache or the activations.\n";

enum { OPT_UNTIL = 256, OPT_IDS, OPT_PRECISION, OPT_NO_MMAP };

/* A whole-number argument >= min of option `name`, or -1 after saying why. */
static long parse_count(const char *name, const char *text, long min) {
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < min || v > 1000000000L) {
        fprintf(stderr, "evalmesh generate: --%s '%s' is not a whole number >= %ld\n", name, text,
                min);
        return -1;
    }
    return v;
}

static int fail(em_status err) {
    fprintf(stderr, "evalmesh generate: %s\n", err->message);
    int code = err->exit_code;
    em_error_free(err);
    return code;
}

/* Encodes the prompts into requests (ids[p] each); 0, or an exit status after saying why. */
static int encode_prompts(const em_tokenizer *tok, const char *const *prompts, int count,
                          int max_tokens, const char *const *until, int until_count, int32_t **ids,
                          em_generate_request *requests) {
    for (int p = 0; p < count; p++) {
        size_t length;
        em_status err = em_tokenizer_encode(tok, prompts[p], strlen(prompts[p]),
                                            em_tokenizer_default_options(tok), &ids[p], &length);
        if (err) return fail(em_error_prefix(err, "prompt %d", p + 1));
        if (length == 0) {
            fprintf(stderr,
                    "evalmesh generate: prompt %d is empty and the tokenizer adds no BOS: nothing "
                    "to start from\n",
                    p + 1);
            return EM_EXIT_BAD_INPUT;
        }
        requests[p] = (em_generate_request){ids[p], (int)length, until, until_count, max_tokens};
    }
    return 0;
}

/* Encodes the prompts, generates them together and prints each text (and ids), then the
 * figures on stderr. */
static int run(const em_model *model, const char *const *prompts, int count, int max_tokens,
               int ctx, int threads, em_precision precision, const char *const *until,
               int until_count, bool print_ids) {
    const em_tokenizer *tok = model->tokenizer;
    if (!tok) {
        fprintf(stderr, "evalmesh generate: model %s has no tokenizer\n", model->path);
        return EM_EXIT_BAD_INPUT;
    }
    int32_t **ids = em_xcalloc((size_t)count, sizeof *ids);
    em_generate_request *requests = em_xcalloc((size_t)count, sizeof *requests);
    em_generation *out = em_xcalloc((size_t)count, sizeof *out);
    int rc = encode_prompts(tok, prompts, count, max_tokens, until, until_count, ids, requests);
    int longest = 0;
    for (int p = 0; p < count && rc == 0; p++)
        if (requests[p].prompt_length > longest) longest = requests[p].prompt_length;
    if (ctx == 0)
        ctx = model->config.n_ctx_train > 0 ? model->config.n_ctx_train : longest + max_tokens;
    void *f = NULL;
    const em_forward_backend *be = &em_forward_backend_cpu;
    em_forward_options options = {.precision = precision};
    em_forward_groups alone = {.tp = {.rank = 0, .size = 1}, .cp = {.rank = 0, .size = 1}};
    double t0 = em_clock_seconds();
    em_status err = rc ? NULL : be->create(model, &alone, threads, &options, &f);
    if (!err && rc == 0) err = em_generate(be, f, tok, ctx, requests, count, out);
    double seconds = em_clock_seconds() - t0;
    if (f) be->free(f);
    if (err) rc = fail(err);
    long generated = 0, prompt_ids = 0;
    for (int p = 0; p < count && rc == 0; p++) {
        fwrite(out[p].text, 1, out[p].length, stdout);
        printf("\n");
        if (print_ids) {
            for (int i = 0; i < out[p].count; i++) printf(i ? " %d" : "%d", out[p].ids[i]);
            printf("\n");
        }
        generated += out[p].count;
        prompt_ids += out[p].prompt_used;
        em_generation_free(&out[p]);
    }
    if (rc == 0)
        fprintf(stderr,
                "generate: %d sequences, %ld prompt and %ld generated tokens in %.3f s (%.1f "
                "generated tokens/s, %d threads, precision %s)\n",
                count, prompt_ids, generated, seconds, generated / seconds, threads,
                em_precision_name(precision));
    for (int p = 0; p < count; p++) {
        em_generation_free(&out[p]); /* those kept by an interruption */
        free(ids[p]);
    }
    free(ids);
    free(requests);
    free(out);
    return rc;
}

static int generate_main(int argc, char **argv) {
    static const struct option flags[] = {
        {"model", required_argument, NULL, 'm'},
        {"prompt", required_argument, NULL, 'p'},
        {"max-tokens", required_argument, NULL, 'n'},
        {"ctx-size", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'},
        {"until", required_argument, NULL, OPT_UNTIL},
        {"ids", no_argument, NULL, OPT_IDS},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {"no-mmap", no_argument, NULL, OPT_NO_MMAP},
        {0},
    };
    const char *model_path = NULL;
    const char **until = em_xcalloc((size_t)argc + 1, sizeof *until);
    const char **prompts = em_xcalloc((size_t)argc + 1, sizeof *prompts);
    int until_count = 0, prompt_count = 0;
    long max_tokens = 64, ctx = 0, threads = 1;
    bool print_ids = false, in_memory = false;
    em_precision precision = EM_PRECISION_EXACT;
    int c, rc = 0;
    while (rc == 0 && (c = em_cli_option("generate", argc, argv, "m:p:n:c:t:", flags)) != -1) {
        if (c == 'm')
            model_path = optarg;
        else if (c == 'p')
            prompts[prompt_count++] = optarg;
        else if (c == 'n')
            rc = (max_tokens = parse_count("max-tokens", optarg, 1)) < 0 ? EM_EXIT_BAD_INPUT : 0;
        else if (c == 'c')
            rc = (ctx = parse_count("ctx-size", optarg, 0)) < 0 ? EM_EXIT_BAD_INPUT : 0;
        else if (c == 't')
            rc = (threads = parse_count("threads", optarg, 1)) < 0 ? EM_EXIT_BAD_INPUT : 0;
        else if (c == OPT_UNTIL)
            until[until_count++] = optarg;
        else if (c == OPT_IDS)
            print_ids = true;
        else if (c == OPT_NO_MMAP)
            in_memory = true;
        else if (c == OPT_PRECISION && !em_precision_parse(optarg, &precision)) {
            fprintf(stderr, "evalmesh generate: --precision '%s' is not exact, ggml or bf16\n",
                    optarg);
            rc = EM_EXIT_BAD_INPUT;
        } else if (c != OPT_PRECISION)
            rc = EM_EXIT_BAD_INPUT;
    }
    if (rc == 0 && optind < argc) rc = em_cli_unexpected("generate", argv[optind]);
    if (rc == 0 && (!model_path || prompt_count == 0)) {
        fprintf(stderr, "evalmesh generate: give -m MODEL and -p PROMPT\n\n%s", USAGE);
        rc = EM_EXIT_BAD_INPUT;
    }
    em_model *model = NULL;
    if (rc == 0) {
        em_status err = em_model_load_with(model_path, in_memory, &model);
        if (err) rc = fail(err);
    }
    if (rc == 0)
        rc = run(model, prompts, prompt_count, (int)max_tokens, (int)ctx, (int)threads, precision,
                 until, until_count, print_ids);
    if (model) em_model_free(model);
    free(until);
    free(prompts);
    return rc;
}

const em_command em_command_generate = {
    .name = "generate",
    .summary = "print a model's greedy continuation of a prompt (key-value cache, cpu)",
    .usage = USAGE,
    .main = generate_main,
};
