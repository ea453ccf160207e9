/* Greedy generation's stopping rules (stages/tasks/generate.h) on a scripted backend: a forward
 * backend row whose prefill and step hand out a fixed script of ids per sequence (and record the
 * prompts they were given), with the stories260K tokenizer decoding them. One case each: a stop
 * string across token boundaries, a stop string at the very start, EOS before any stop string,
 * max_gen_toks reached, an empty prompt (BOS alone), a prompt truncated from the left, and two
 * stop strings cut at the earlier (lm-eval's split for each term); every case alone and all of
 * them in one call give the same ids and text. Also: a backend without decoding is refused (exit
 * status 2) naming the backends that decode, as is max_gen_toks that leaves no room; and a
 * SIGTERM raised during a step ends the decoding after that step (exit status 6) keeping the
 * sequence it finished, the unfinished ones dropped. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/kernels/cpu/llama_forward.h"
#include "stages/tasks/generate.h"
#include "stages/tokenizer/tokenizer.h"
#include "test.h"
#include "util/stop.h"

#define MOST 64
#define CASES 7

/* The script of each slot and what prefill was given. */
typedef struct scripted {
    int32_t script[CASES][MOST];
    int script_length[CASES];
    int next[CASES]; /* the script's next index per slot */
    int32_t eos;     /* handed out past a script's end */
    int prompt_length[CASES];
    int32_t prompt_first[CASES];
    bool fed_back;          /* every step got the id handed out last */
    int steps, raise_after; /* steps taken; SIGTERM raised in step raise_after (0: never) */
} scripted;

static int32_t hand_out(scripted *s, int slot) {
    return s->next[slot] < s->script_length[slot] ? s->script[slot][s->next[slot]++] : s->eos;
}

static em_status scripted_new(void *f, int sequences, int positions, void **out) {
    (void)sequences;
    (void)positions;
    *out = f;
    return NULL;
}

static em_status scripted_prefill(void *d, const int *slots, const int32_t *const *prompts,
                                  const int *lengths, int count, int32_t *next, float *logits) {
    scripted *s = d;
    (void)logits;
    for (int i = 0; i < count; i++) {
        s->next[slots[i]] = 0;
        s->prompt_length[slots[i]] = lengths[i];
        s->prompt_first[slots[i]] = prompts[i][0];
        next[i] = hand_out(s, slots[i]);
    }
    return NULL;
}

static em_status scripted_step(void *d, const int *slots, const int32_t *tokens, int count,
                               int32_t *next, float *logits) {
    scripted *s = d;
    (void)logits;
    for (int i = 0; i < count; i++) {
        int at = s->next[slots[i]] - 1;
        s->fed_back = s->fed_back && at >= 0 && s->script[slots[i]][at] == tokens[i];
        next[i] = hand_out(s, slots[i]);
    }
    if (++s->steps == s->raise_after) raise(SIGTERM);
    return NULL;
}

static void scripted_free(void *d) {
    (void)d;
}

static const em_forward_backend scripted_backend = {
    .name = "scripted",
    .decode_new = scripted_new,
    .prefill = scripted_prefill,
    .step = scripted_step,
    .decode_free = scripted_free,
};

/* One case: the text whose ids the script hands out (then EOS, with eos_after), the prompt,
 * until, max_gen_toks and what must come out. */
typedef struct stop_case {
    const char *name;
    const char *script_text;
    bool eos_after;    /* EOS follows the script text, then " more" */
    int prompt_length; /* BOS then ids 5, 6, ... */
    const char *until[2];
    int max_gen_toks;
    const char *want_text;
    int want_count; /* the script's first ids that come out */
    em_generate_stop want_stop;
    int want_prompt_used;
} stop_case;

#define MAX_LENGTH 24

static const stop_case cases[CASES] = {
    /* "n. T" lies across "an", "." and "▁The": six ids out, the text cut before it */
    {"across token boundaries",
     "Tom ran. Then Sue sat.",
     false,
     3,
     {"n. T", NULL},
     20,
     "Tom ra",
     6,
     EM_GENERATE_UNTIL,
     3},
    /* "Tom" is whole after "▁T" "om" */
    {"stop string at the very start",
     "Tom ran. Then Sue sat.",
     false,
     3,
     {"Tom", NULL},
     20,
     "",
     2,
     EM_GENERATE_UNTIL,
     3},
    {"EOS before any stop",
     "Tom ran.",
     true,
     3,
     {"Sue", NULL},
     20,
     "Tom ran.",
     5,
     EM_GENERATE_EOS,
     3},
    {"max_gen_toks reached",
     "Tom ran. Then Sue sat.",
     false,
     3,
     {"dog", NULL},
     3,
     "Tom r",
     3,
     EM_GENERATE_MAX_TOKENS,
     3},
    {"empty prompt (BOS alone)",
     "Tom ran.",
     true,
     1,
     {NULL, NULL},
     20,
     "Tom ran.",
     5,
     EM_GENERATE_EOS,
     1},
    {"prompt truncated from the left",
     "Tom ran.",
     true,
     30,
     {NULL, NULL},
     10,
     "Tom ran.",
     5,
     EM_GENERATE_EOS,
     MAX_LENGTH - 10},
    /* ". " shows up with "▁The", before "Sue" */
    {"two stop strings, the earlier cuts",
     "Tom ran. Then Sue sat.",
     false,
     3,
     {"Sue", ". "},
     20,
     "Tom ran",
     6,
     EM_GENERATE_UNTIL,
     3},
};

/* stories260K's ids of "Tom ran. Then Sue sat." (no BOS): ▁T om ▁r an . ▁The n ▁S u e ▁s at . */
static const int32_t story_ids[] = {274, 287, 352, 303, 426, 291, 416,
                                    301, 425, 411, 262, 294, 426};

static void check_ok(em_status err) {
    CHECK(err == NULL);
    if (err) {
        fprintf(stderr, "%s\n", err->message);
        em_error_free(err);
    }
}

/* Runs the cases whose indexes are in which (n) in one call and checks each one's result. */
static void run_cases(const em_tokenizer *tok, scripted *base, const int *which, int n) {
    scripted s = *base;
    int32_t bos = em_tokenizer_bos(tok);
    static int32_t prompts[CASES][40];
    em_generate_request requests[CASES];
    const char *until[CASES][2];
    for (int k = 0; k < n; k++) {
        const stop_case *c = &cases[which[k]];
        /* the scripts are in slot order: slot k gets case which[k]'s */
        memcpy(s.script[k], base->script[which[k]], sizeof s.script[k]);
        s.script_length[k] = base->script_length[which[k]];
        prompts[k][0] = bos;
        for (int i = 1; i < c->prompt_length; i++) prompts[k][i] = 4 + i;
        int u = 0;
        for (int j = 0; j < 2; j++)
            if (c->until[j]) until[k][u++] = c->until[j];
        requests[k] =
            (em_generate_request){prompts[k], c->prompt_length, until[k], u, c->max_gen_toks};
    }
    s.fed_back = true;
    em_generation out[CASES];
    check_ok(em_generate(&scripted_backend, &s, tok, MAX_LENGTH, requests, n, out));
    CHECK(s.fed_back);
    for (int k = 0; k < n; k++) {
        const stop_case *c = &cases[which[k]];
        printf("%s (%d of %d): \"%s\", %d ids, stop %d\n", c->name, k + 1, n, out[k].text,
               out[k].count, (int)out[k].stop);
        CHECK_STR_EQ(out[k].text, c->want_text);
        CHECK_INT_EQ(out[k].length, strlen(c->want_text));
        CHECK_INT_EQ(out[k].count, c->want_count);
        CHECK(out[k].count <= c->want_count && memcmp(out[k].ids, base->script[which[k]],
                                                      (size_t)out[k].count * sizeof(int32_t)) == 0);
        CHECK_INT_EQ(out[k].stop, c->want_stop);
        CHECK_INT_EQ(out[k].prompt_used, c->want_prompt_used);
        CHECK_INT_EQ(s.prompt_length[k], c->want_prompt_used);
        /* a truncated prompt keeps its last ids */
        CHECK_INT_EQ(s.prompt_first[k], c->prompt_length > c->want_prompt_used
                                            ? 4 + c->prompt_length - c->want_prompt_used
                                            : bos);
        em_generation_free(&out[k]);
    }
}

/* SIGTERM in the first step of cases 1 (done after that step's id), 3 and 0 decoded together:
 * interrupted after the step, case 1's generation kept, the others dropped. Last: the stop flag
 * stays set. */
static void interrupted(const em_tokenizer *tok, const scripted *base) {
    check_ok(em_stop_install());
    scripted s = *base;
    s.raise_after = 1;
    const int which[3] = {1, 3, 0};
    int32_t prompt[3] = {em_tokenizer_bos(tok), 5, 6};
    em_generate_request requests[3];
    for (int k = 0; k < 3; k++) {
        memcpy(s.script[k], base->script[which[k]], sizeof s.script[k]);
        s.script_length[k] = base->script_length[which[k]];
        requests[k] = (em_generate_request){prompt, 3, cases[which[k]].until, 1,
                                            cases[which[k]].max_gen_toks};
    }
    em_generation out[3];
    em_status err = em_generate(&scripted_backend, &s, tok, MAX_LENGTH, requests, 3, out);
    CHECK(err && err->exit_code == EM_EXIT_INTERRUPTED);
    if (err) {
        printf("interrupted: %s\n", err->message);
        CHECK_STR_EQ(err->message, "generation: interrupted by signal 15 (Terminated) with 1 of "
                                   "3 sequences finished");
        em_error_free(err);
    }
    CHECK_INT_EQ(s.steps, 1);
    CHECK(out[0].finished && out[0].text && !strcmp(out[0].text, "") && out[0].count == 2 &&
          out[0].stop == EM_GENERATE_UNTIL);
    for (int k = 1; k < 3; k++) CHECK(!out[k].finished && !out[k].ids && !out[k].text);
    for (int k = 0; k < 3; k++) em_generation_free(&out[k]);
}

int main(void) {
    char path[4096];
    test_shared_file("models/stories260K.gguf", path, sizeof path);
    em_tokenizer *tok;
    check_ok(em_tokenizer_load(path, &tok));
    int32_t eos = em_tokenizer_eos(tok);
    scripted base = {.eos = eos};
    em_encode_options plain = em_tokenizer_default_options(tok);
    plain.add_bos = false;
    for (int c = 0; c < CASES; c++) {
        int32_t *ids;
        size_t count;
        check_ok(em_tokenizer_encode(tok, cases[c].script_text, strlen(cases[c].script_text), plain,
                                     &ids, &count));
        /* the script is a prefix of story_ids, as the tokenizer spells the text */
        CHECK(count <= sizeof story_ids / sizeof *story_ids &&
              memcmp(ids, story_ids, count * sizeof *ids) == 0);
        memcpy(base.script[c], story_ids, count * sizeof *ids);
        base.script_length[c] = (int)count;
        free(ids);
        if (cases[c].eos_after) {
            base.script[c][base.script_length[c]++] = eos;
            base.script[c][base.script_length[c]++] = 100; /* never reached */
        }
        printf("%s: script", cases[c].name);
        for (int i = 0; i < base.script_length[c]; i++) printf(" %d", base.script[c][i]);
        printf("\n");
    }
    /* each case alone, then all of them together */
    for (int c = 0; c < CASES; c++) run_cases(tok, &base, &c, 1);
    int all[CASES];
    for (int c = 0; c < CASES; c++) all[CASES - 1 - c] = c;
    run_cases(tok, &base, all, CASES);

    em_generate_request request = {base.script[0], 2, NULL, 0, MAX_LENGTH};
    em_generation out[1];
    em_status err = em_generate(&scripted_backend, &base, tok, MAX_LENGTH, &request, 1, out);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err) {
        CHECK_STR_EQ(err->message, "max_gen_toks 24 does not leave room for a prompt in 24 "
                                   "positions (1 to 23)");
        em_error_free(err);
    }
    /* a backend row without decoding; the table's rows that decode are named (cuda where this
     * build has the toolkit) */
    static const em_forward_backend scoring_only = {.name = "scoring-only"};
    err = em_generate(&scoring_only, NULL, tok, MAX_LENGTH, &request, 1, out);
    CHECK(err && err->exit_code == EM_EXIT_BAD_INPUT);
    if (err) {
        CHECK_STR_EQ(err->message,
                     em_forward_backend_find("cuda")->decode_new
                         ? "the scoring-only forward backend does not decode (greedy generation "
                           "runs on: cpu cuda)"
                         : "the scoring-only forward backend does not decode (greedy generation "
                           "runs on: cpu)");
        em_error_free(err);
    }
    interrupted(tok, &base);
    em_tokenizer_free(tok);
    return test_finish();
}
