/* Loads BIG-bench task.json files into em_tasks, following bigbench/api/json_task.py (1.0.0)
 * step for step: JsonTask.load_and_process_json (required fields, metrics, defaults of the
 * prefixes, duplicates dropped by their json.dumps text), default_format_fn (one example's prompt
 * and choices) and make_nshot_dataset (which examples are asked, with which few-shot examples).
 * Python's rules are kept where the files rely on them: the last of repeated keys wins, and
 * append_choices_to_input is read for its truth value ("false", a string, is true). */
#include "stages/tasks/bigbench_task.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "stages/tasks/bigbench_generation.h"
#include "stages/tasks/mt19937.h"
#include "util/log.h"
#include "util/regular_file.h"

/* json_task.py's random_seed: the choices' permutation and the few-shot draws. */
enum { BIGBENCH_SEED = 42 };

/* json_task.py's metric lists. */
static const char *const GENERATIVE_METRICS[] = {"bleu",
                                                 "bleurt",
                                                 "exact_str_match",
                                                 "case_insensitive_str_match",
                                                 "sequence_f1",
                                                 "numeric_match_with_0_1_relative_error",
                                                 "rouge",
                                                 NULL};
static const char *const SCORING_METRICS[] = {"log_likelihood", NULL};
static const char *const MULTIPLE_CHOICE_METRICS[] = {"multiple_choice_grade",
                                                      "calibration_multiple_choice_brier_score",
                                                      "expected_calibration_error",
                                                      "weighted_log_probabilities",
                                                      "weighted_probabilities",
                                                      "macro_f1",
                                                      NULL};

static bool listed(const char *const *list, const char *name) {
    for (; *list; list++)
        if (strcmp(*list, name) == 0) return true;
    return false;
}

/* The value of key in obj as Python's json.load keeps it: the last of repeated keys. */
static const cJSON *field(const cJSON *obj, const char *key) {
    const cJSON *found = NULL;
    for (const cJSON *c = cJSON_IsObject(obj) ? obj->child : NULL; c; c = c->next)
        if (c->string && strcmp(c->string, key) == 0) found = c;
    return found;
}

/* Python's truth value of a JSON value. */
static bool truthy(const cJSON *v) {
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    if (cJSON_IsString(v)) return v->valuestring[0] != '\0';
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) return v->child != NULL;
    return false;
}

/* Python's == between two JSON values as json_task loads them (json.load with OrderedDict):
 * objects compare key by key in order, numbers and booleans by value (True == 1). */
static bool python_equal(const cJSON *a, const cJSON *b) {
    bool a_num = cJSON_IsNumber(a) || cJSON_IsBool(a), b_num = cJSON_IsNumber(b) || cJSON_IsBool(b);
    if (a_num || b_num) {
        double x = cJSON_IsBool(a) ? cJSON_IsTrue(a) : a->valuedouble;
        double y = cJSON_IsBool(b) ? cJSON_IsTrue(b) : b->valuedouble;
        return a_num && b_num && x == y;
    }
    if (cJSON_IsString(a) || cJSON_IsString(b))
        return cJSON_IsString(a) && cJSON_IsString(b) &&
               strcmp(a->valuestring, b->valuestring) == 0;
    if ((a->type & 0xff) != (b->type & 0xff)) return false;
    const cJSON *x = a->child, *y = b->child;
    for (; x && y; x = x->next, y = y->next)
        if ((cJSON_IsObject(a) && strcmp(x->string, y->string) != 0) || !python_equal(x, y))
            return false;
    return !x && !y;
}

/* Parses a whole JSON file; a syntax error is exit 2 at its file:line:col. */
static em_status parse_file(const char *path, cJSON **out) {
    char *text;
    size_t len;
    em_status err = em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a BIG-bench task", &text, &len);
    if (err) return err;
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!*out) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        em_mark mark = {em_intern(path), 1, 1};
        for (const char *p = text; at && p < at && p < text + len; p++) {
            mark.col = *p == '\n' ? 1 : mark.col + 1;
            mark.line += *p == '\n';
        }
        free(text);
        return em_error_at(EM_EXIT_BAD_INPUT, mark, "invalid JSON");
    }
    free(text);
    return NULL;
}

/* parts[0..n) joined into a new string. */
static char *concat(const char *const *parts, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += strlen(parts[i]);
    char *s = em_xmalloc(len + 1), *p = s;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(parts[i]);
        memcpy(p, parts[i], l);
        p += l;
    }
    *p = '\0';
    return s;
}

/* name.encode("ascii", errors="replace"): every non-ASCII character becomes '?'. */
static char *ascii_name(const char *name) {
    char *out = em_xmalloc(strlen(name) + 1), *p = out;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        if (*s < 0x80)
            *p++ = (char)*s;
        else if ((*s & 0xc0) != 0x80)
            *p++ = '?';
    *p = '\0';
    return out;
}

/* The prompt pieces a task sets, with json_task.py's defaults. */
typedef struct bigbench_format {
    const char *task_prefix, *input_prefix, *output_prefix, *choice_prefix, *separator;
    bool append_choices;
} bigbench_format;

/* One distinct example, formatted by default_format_fn. */
typedef struct bigbench_sample {
    size_t doc_index;
    const cJSON *json;
    char *input;          /* input_prefix + input [+ choice_prefix + choices] + output_prefix */
    uint64_t hash;        /* of input */
    const char **targets; /* the "target" (a string or a list) or the best choice */
    size_t target_count;
    const char **choices; /* the target_scores keys in the file's order */
    double *scores;
    size_t choice_count;
} bigbench_sample;

static void sample_clear(bigbench_sample *s) {
    free(s->input);
    free(s->targets);
    free(s->choices);
    free(s->scores);
}

/* Two formatted samples are == in Python (make_nshot_dataset leaves out every sample equal to
 * the query, not only the query itself): after duplicates are dropped by their json.dumps text,
 * only examples that differ in true against 1 (or false against 0) still are. */
static bool same_sample(const bigbench_sample *a, const bigbench_sample *b) {
    return a == b || (a->hash == b->hash && python_equal(a->json, b->json));
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "FILE: task 'TASK': examples[INDEX]: WHAT PROBLEM", exit 2. */
static em_status example_error(const char *file, const char *task, size_t index, const char *what,
                               const char *problem) {
    return em_error_new(EM_EXIT_BAD_INPUT, "%s: task '%s': examples[%zu]: %s %s", file, task, index,
                        what, problem);
}

/* default_format_fn for the example at index of the file: checks its fields and fills s. */
static em_status format_sample(const char *file, const char *task, const bigbench_format *fmt,
                               bool needs_target, bool generative, const cJSON *ex, size_t index,
                               bigbench_sample *s) {
    *s = (bigbench_sample){.doc_index = index, .json = ex};
    const cJSON *input = field(ex, "input"), *scores = field(ex, "target_scores");
    const cJSON *target = field(ex, "target");
    if (!cJSON_IsString(input))
        return example_error(file, task, index, "'input'", "must be a string");
    if (generative) { /* a generative task: "target" alone is read */
        scores = NULL;
        if (!target)
            return example_error(file, task, index, "'target'",
                                 "is missing (the task has generative metrics)");
    } else if (!cJSON_IsObject(scores) || !scores->child)
        return example_error(file, task, index, "'target_scores'",
                             "must be an object of choices and their scores");
    if (needs_target && !target)
        return example_error(file, task, index, "'target'",
                             "is missing (the task has generative or log_likelihood metrics)");
    for (const cJSON *c = scores ? scores->child : NULL; c; c = c->next) {
        if (!cJSON_IsNumber(c))
            return example_error(file, task, index, "'target_scores'",
                                 "must map every choice to a number");
        s->choice_count++;
    }
    s->choices = em_xmalloc((s->choice_count ? s->choice_count : 1) * sizeof *s->choices);
    s->scores = em_xmalloc((s->choice_count ? s->choice_count : 1) * sizeof *s->scores);
    size_t best = 0, i = 0;
    for (const cJSON *c = scores ? scores->child : NULL; c; c = c->next, i++) {
        s->choices[i] = c->string;
        s->scores[i] = c->valuedouble;
        if (s->scores[i] > s->scores[best]) best = i;
    }
    if (target) {
        s->target_count = cJSON_IsArray(target) ? (size_t)cJSON_GetArraySize(target) : 1;
        if (!s->target_count) /* a few-shot answer is drawn from it */
            return example_error(file, task, index, "'target'", "must not be an empty list");
        s->targets = em_xmalloc(s->target_count * sizeof *s->targets);
        const cJSON *t = cJSON_IsArray(target) ? target->child : target;
        for (i = 0; i < s->target_count; i++, t = t->next) {
            if (!cJSON_IsString(t))
                return example_error(file, task, index, "'target'",
                                     "must be a string or a list of strings");
            s->targets[i] = t->valuestring;
        }
    } else {
        double min = s->scores[0];
        for (i = 1; i < s->choice_count; i++) min = s->scores[i] < min ? s->scores[i] : min;
        double max = s->scores[best];
        if ((s->choice_count == 1 && max == 0) || (s->choice_count > 1 && max <= min))
            return example_error(file, task, index, "'target_scores'",
                                 "gives no choice a higher score");
        s->target_count = 1;
        s->targets = em_xmalloc(sizeof *s->targets);
        s->targets[0] = s->choices[best];
    }
    const char *text = input->valuestring;
    char *with_choices = NULL;
    if (fmt->append_choices && !generative) {
        /* rng.permutation(sorted(choices)) with a fresh RandomState(42) */
        const char **sorted = em_xmalloc(s->choice_count * sizeof *sorted);
        memcpy(sorted, s->choices, s->choice_count * sizeof *sorted);
        qsort(sorted, s->choice_count, sizeof *sorted, compare_strings);
        size_t *order = em_xmalloc(s->choice_count * sizeof *order);
        em_mt19937 mt;
        em_mt19937_seed_numpy(&mt, BIGBENCH_SEED);
        em_numpy_permutation(&mt, s->choice_count, order);
        const char **parts = em_xmalloc(2 * s->choice_count * sizeof *parts + sizeof *parts);
        parts[0] = text;
        for (i = 0; i < s->choice_count; i++) {
            parts[1 + 2 * i] = fmt->choice_prefix;
            parts[2 + 2 * i] = sorted[order[i]];
        }
        with_choices = concat(parts, 1 + 2 * s->choice_count);
        text = with_choices;
        free(parts);
        free(order);
        free(sorted);
    }
    s->input = concat((const char *[]){fmt->input_prefix, text, fmt->output_prefix}, 3);
    s->hash = XXH3_64bits(s->input, strlen(s->input));
    free(with_choices);
    return NULL;
}

/* An example's JSON text (cJSON's, standing in for json.dumps) and its place in the file. */
typedef struct example_text {
    char *text;
    size_t index;
} example_text;

/* By text, equal texts by place. */
static int compare_example_texts(const void *a, const void *b) {
    const example_text *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    if (c) return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Indices of the distinct examples (the first of each JSON text), in file order. */
static size_t distinct_examples(const cJSON *examples, size_t count, size_t *keep) {
    example_text *texts = em_xmalloc((count ? count : 1) * sizeof *texts);
    size_t i = 0;
    for (const cJSON *ex = examples->child; ex; ex = ex->next, i++)
        texts[i] = (example_text){cJSON_PrintUnformatted(ex), i};
    qsort(texts, count, sizeof *texts, compare_example_texts);
    bool *duplicate = em_xcalloc(count ? count : 1, sizeof *duplicate);
    for (i = 1; i < count; i++)
        if (strcmp(texts[i].text, texts[i - 1].text) == 0) duplicate[texts[i].index] = true;
    size_t kept = 0;
    for (i = 0; i < count; i++) {
        if (!duplicate[i]) keep[kept++] = i;
        free(texts[i].text);
    }
    free(duplicate);
    free(texts);
    return kept;
}

/* The p-th index of [0, n) left when the sorted indices `left_out` are taken away. */
static size_t nth_kept(size_t p, const size_t *left_out, size_t count) {
    for (size_t i = 0; i < count && left_out[i] <= p; i++) p++;
    return p;
}

typedef struct hash_index {
    uint64_t hash;
    size_t index;
} hash_index;

static int compare_hash_index(const void *a, const void *b) {
    const hash_index *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* make_nshot_dataset: which samples are asked (*queries, *query_count) and the prompt of each
 * (contexts[i], without task_prefix), drawn from one RandomState(42). False (with the prompts
 * made so far counted) when a query leaves fewer than `shots` samples to draw from, which numpy
 * refuses: other samples equal to it as Python compares them are left out too. */
static bool make_nshot(const bigbench_sample *samples, size_t n, int shots, size_t limit,
                       const char *separator, size_t *queries, size_t *query_count,
                       char **contexts) {
    em_mt19937 mt;
    em_mt19937_seed_numpy(&mt, BIGBENCH_SEED);
    size_t *order = em_xmalloc(n * sizeof *order);
    size_t asked = limit && limit < n ? limit : n;
    *query_count = 0;
    if (shots == 0) {
        if (asked < n)
            em_numpy_permutation(&mt, n, order);
        else
            for (size_t i = 0; i < n; i++) order[i] = i;
        for (size_t q = 0; q < asked; q++) {
            queries[q] = order[q];
            contexts[q] = em_xstrdup(samples[order[q]].input);
        }
        *query_count = asked;
        free(order);
        return true;
    }
    hash_index *by_hash = em_xmalloc(n * sizeof *by_hash);
    for (size_t i = 0; i < n; i++) by_hash[i] = (hash_index){samples[i].hash, i};
    qsort(by_hash, n, sizeof *by_hash, compare_hash_index);
    size_t *query_order = em_xmalloc(n * sizeof *query_order);
    em_numpy_permutation(&mt, n, query_order);
    size_t *left_out = em_xmalloc(n * sizeof *left_out);
    const char **parts = em_xmalloc(2 * (size_t)shots * sizeof *parts);
    for (size_t q = 0; q < asked; q++) {
        const bigbench_sample *query = &samples[query_order[q]];
        /* valid_samples = [x for x in samples if x != sample] */
        size_t lo = 0, hi = n, count = 0;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (by_hash[mid].hash < query->hash)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < n && by_hash[lo].hash == query->hash; lo++)
            if (same_sample(&samples[by_hash[lo].index], query))
                left_out[count++] = by_hash[lo].index;
        if (n - count < (size_t)shots) {
            queries[q] = query_order[q]; /* the query that cannot have its shots */
            break;
        }
        em_numpy_permutation(&mt, n - count, order);
        for (int s = 0; s < shots; s++) {
            const bigbench_sample *shot = &samples[nth_kept(order[s], left_out, count)];
            /* rng.choice(example["target"]): randint(0, len), no draw for one target */
            uint64_t pick = em_numpy_interval(&mt, shot->target_count - 1);
            parts[2 * s] = shot->input;
            parts[2 * s + 1] = shot->targets[pick];
        }
        /* separator.join(shot input + target) + separator + query input */
        size_t len = 0;
        for (int s = 0; s < shots; s++)
            len += strlen(parts[2 * s]) + strlen(parts[2 * s + 1]) + strlen(separator);
        char *context = em_xmalloc(len + strlen(query->input) + 1), *p = context;
        for (int s = 0; s < shots; s++) {
            p = stpcpy(stpcpy(stpcpy(p, parts[2 * s]), parts[2 * s + 1]), separator);
        }
        strcpy(p, query->input);
        queries[q] = query_order[q];
        contexts[q] = context;
        *query_count = q + 1;
    }
    bool made = *query_count == asked;
    free(parts);
    free(left_out);
    free(query_order);
    free(by_hash);
    free(order);
    return made;
}

static em_status field_error(const char *file, const char *task, const char *key,
                             const char *what) {
    return em_error_new(EM_EXIT_BAD_INPUT, "%s: task '%s': '%s' %s", file, task, key, what);
}

/* A string field with its default (task_prefix and the prefixes); NULL with *err when it is
 * not a string. */
static const char *string_field(const cJSON *data, const char *key, const char *fallback,
                                const char *file, const char *task, em_status *err) {
    const cJSON *v = field(data, key);
    if (!v || *err) return fallback;
    if (cJSON_IsString(v)) return v->valuestring;
    *err = field_error(file, task, key, "must be a string");
    return NULL;
}

/* The fields every task and subtask has (json_task.py's required_keys). */
static em_status check_required(const cJSON *data, const char *file, const char *task) {
    static const char *const required[] = {"canary", "name", "description", "keywords"};
    for (size_t i = 0; i < sizeof required / sizeof *required; i++)
        if (!field(data, required[i])) return field_error(file, task, required[i], "is missing");
    return NULL;
}

/* What kind of task the metrics make it. */
typedef enum task_kind { TASK_MULTIPLE_CHOICE, TASK_GENERATIVE } task_kind;

/* Checks the metrics: *kind, *needs_target (generative or scoring metrics ask for "target"). */
static em_status read_metrics(const cJSON *data, const char *file, const char *task,
                              task_kind *kind, bool *needs_target, char **listing) {
    const cJSON *metrics = field(data, "metrics");
    if (!cJSON_IsArray(metrics)) return field_error(file, task, "metrics", "must be a list");
    bool multiple_choice = false, grade = false;
    *needs_target = false;
    size_t len = 1;
    for (const cJSON *m = metrics->child; m; m = m->next) {
        if (!cJSON_IsString(m)) return field_error(file, task, "metrics", "must list strings");
        const char *name = m->valuestring;
        if (listed(MULTIPLE_CHOICE_METRICS, name))
            multiple_choice = true, grade |= strcmp(name, "multiple_choice_grade") == 0;
        else if (listed(GENERATIVE_METRICS, name) || listed(SCORING_METRICS, name))
            *needs_target = true;
        else
            return em_error_new(EM_EXIT_BAD_INPUT,
                                "%s: task '%s': metric '%s' is not one of "
                                "BIG-bench's",
                                file, task, name);
        len += strlen(name) + 2;
    }
    *listing = em_xmalloc(len);
    char *p = *listing;
    *p = '\0';
    for (const cJSON *m = metrics->child; m; m = m->next)
        p = stpcpy(stpcpy(p, m == metrics->child ? "" : ", "), m->valuestring);
    *kind = multiple_choice ? TASK_MULTIPLE_CHOICE : TASK_GENERATIVE;
    if (multiple_choice && !grade)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: task '%s' is scored by %s; evalmesh computes "
                            "multiple_choice_grade only",
                            file, task, *listing);
    return NULL;
}

/* A generative task's scoring: exact_str_match (the other generative metrics are refused), the
 * output_regex and stop_string of its task.json (json_task.py: the default regex when it has
 * neither), BIG-bench's max_length of 256 tokens generated and 256 characters kept; no stop
 * strings for the decoder (postprocess_output cuts at stop_string only past the first
 * character). */
static em_status read_generation(const cJSON *data, const char *file, const char *task,
                                 const char *metrics, em_task_generation *g) {
    bool exact = false;
    for (const cJSON *m = field(data, "metrics")->child; m; m = m->next)
        exact |= strcmp(m->valuestring, "exact_str_match") == 0;
    if (!exact)
        return em_error_new(EM_EXIT_BAD_INPUT,
                            "%s: task '%s' is scored by %s; evalmesh computes BIG-bench's "
                            "exact_str_match of generative tasks only",
                            file, task, metrics);
    const cJSON *regex = field(data, "output_regex"), *stop = field(data, "stop_string");
    if ((regex && !cJSON_IsString(regex)) || (stop && !cJSON_IsString(stop)))
        return field_error(file, task,
                           regex && !cJSON_IsString(regex) ? "output_regex" : "stop_string",
                           "must be a string");
    g->max_gen_toks = EM_BIGBENCH_MAX_LENGTH;
    g->max_length = EM_BIGBENCH_MAX_LENGTH;
    if (stop) g->stop_string = em_xstrdup(stop->valuestring);
    const char *pattern = regex  ? regex->valuestring
                          : stop ? NULL
                                 : EM_BIGBENCH_DEFAULT_OUTPUT_REGEX;
    if (pattern && *pattern) {
        char *what = em_xasprintf("%s: task '%s': output_regex", file, task);
        em_status err = em_bigbench_output_regex(pattern, what, &g->output_regex);
        free(what);
        if (err) return err;
    }
    return NULL;
}

/* The em_task of one task.json holding examples (a task, or one subtask of parent); *out NULL
 * and *kind TASK_GENERATIVE for a generative-only one. */
static em_status load_examples(const cJSON *data, const char *file, const char *parent,
                               const em_bigbench_options *options, em_task **out, task_kind *kind,
                               char **metrics) {
    *out = NULL;
    const cJSON *name = field(data, "name");
    if (!cJSON_IsString(name))
        return em_error_new(EM_EXIT_BAD_INPUT, "%s: 'name' is missing or not a string", file);
    char *own = ascii_name(name->valuestring);
    char *task = parent ? em_xasprintf("%s:%s", parent, own) : em_xstrdup(own);
    free(own);
    bigbench_sample *samples = NULL;
    size_t *keep = NULL, kept = 0;
    bool needs_target = false;
    em_task_generation generation = {0};
    em_status err = check_required(data, file, task);
    if (!err) err = read_metrics(data, file, task, kind, &needs_target, metrics);
    const cJSON *examples = field(data, "examples");
    if (!err && !cJSON_IsArray(examples))
        err = field_error(file, task, "examples", "must be a list");
    if (!err && !cJSON_IsString(field(data, "preferred_score")))
        err = field_error(file, task, "preferred_score", "must be a string");
    bool generative = *kind == TASK_GENERATIVE;
    if (err || (generative && !options->generative)) goto done;
    if (generative && (err = read_generation(data, file, task, *metrics, &generation))) goto done;
    bigbench_format fmt = {
        .task_prefix = string_field(data, "task_prefix", "", file, task, &err),
        .input_prefix = string_field(data, "example_input_prefix", "\nQ: ", file, task, &err),
        .output_prefix = string_field(data, "example_output_prefix", "\nA: ", file, task, &err),
        .choice_prefix = string_field(data, "choice_prefix", "\n  choice: ", file, task, &err),
        .separator = string_field(data, "few_shot_example_separator", "\n", file, task, &err),
        .append_choices = !field(data, "append_choices_to_input") ||
                          truthy(field(data, "append_choices_to_input")),
    };
    if (err) goto done;
    size_t count = (size_t)cJSON_GetArraySize(examples), i = 0;
    for (const cJSON *ex = examples->child; ex; ex = ex->next, i++)
        if (!cJSON_IsObject(ex)) {
            err = example_error(file, task, i, "the example", "must be an object");
            goto done;
        }
    keep = em_xmalloc((count ? count : 1) * sizeof *keep);
    kept = distinct_examples(examples, count, keep);
    if (kept < count)
        em_log_warn("%s: task '%s' has %zu duplicate examples out of %zu", file, task, count - kept,
                    count);
    if (kept < (size_t)options->num_fewshot + 1) {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: task '%s': insufficient distinct examples "
                           "(%zu) for %d shots",
                           file, task, kept, options->num_fewshot);
        goto done;
    }
    samples = em_xcalloc(kept, sizeof *samples);
    const cJSON *ex = examples->child;
    for (size_t k = 0, doc = 0; k < kept && !err; ex = ex->next, doc++)
        if (doc == keep[k])
            err = format_sample(file, task, &fmt, needs_target, generative, ex, doc, &samples[k++]);
    if (err) goto done;
    size_t *queries = em_xmalloc(kept * sizeof *queries), asked;
    char **contexts = em_xmalloc(kept * sizeof *contexts);
    if (!make_nshot(samples, kept, options->num_fewshot, options->limit, fmt.separator, queries,
                    &asked, contexts)) {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: task '%s': examples[%zu] has fewer than %d "
                           "other examples to draw its shots from (BIG-bench leaves out the ones "
                           "equal to it)",
                           file, task, samples[queries[asked]].doc_index, options->num_fewshot);
        for (size_t q = 0; q < asked; q++) free(contexts[q]);
        free(contexts);
        free(queries);
        goto done;
    }
    em_task *t = em_xcalloc(1, sizeof *t);
    t->name = task;
    task = NULL;
    t->version = em_xstrdup("1.0.0");
    t->format = EM_TASK_FORMAT_BIGBENCH;
    t->output = generative ? EM_TASK_GENERATE_UNTIL : EM_TASK_MULTIPLE_CHOICE;
    t->metrics = generative ? EM_TASK_METRIC_EXACT_STR_MATCH : EM_TASK_METRIC_MULTIPLE_CHOICE_GRADE;
    t->generation = generation;
    generation = (em_task_generation){0};
    t->num_fewshot = options->num_fewshot;
    t->absolute_normalization = truthy(field(data, "absolute_normalization"));
    t->examples = em_xcalloc(asked ? asked : 1, sizeof *t->examples);
    t->example_count = asked;
    /* the examples in document order: queries index samples, which are in file order */
    size_t *slot = em_xmalloc(kept * sizeof *slot);
    for (i = 0; i < kept; i++) slot[i] = SIZE_MAX;
    for (size_t q = 0; q < asked; q++) slot[queries[q]] = q;
    size_t e = 0;
    for (size_t k = 0; k < kept; k++) {
        if (slot[k] == SIZE_MAX) continue;
        const bigbench_sample *s = &samples[k];
        em_task_example *x = &t->examples[e++];
        x->doc_index = s->doc_index;
        x->context = concat((const char *[]){fmt.task_prefix, contexts[slot[k]]}, 2);
        x->doc_json = cJSON_PrintUnformatted(s->json);
        if (generative) { /* the targets, any of which the response may equal */
            x->choice_count = s->target_count;
            x->continuations = em_xmalloc(s->target_count * sizeof *x->continuations);
            x->choices = em_xmalloc(s->target_count * sizeof *x->choices);
            for (size_t c = 0; c < s->target_count; c++) {
                x->continuations[c] = em_xstrdup(s->targets[c]);
                x->choices[c] = em_xstrdup(s->targets[c]);
            }
            continue;
        }
        x->choice_count = s->choice_count;
        x->continuations = em_xmalloc(s->choice_count * sizeof *x->continuations);
        x->choices = em_xmalloc(s->choice_count * sizeof *x->choices);
        x->target_scores = em_xmalloc(s->choice_count * sizeof *x->target_scores);
        size_t best = 0, tied = 0; /* gold: the one best choice, -1 when several share it */
        for (size_t c = 0; c < s->choice_count; c++) {
            x->continuations[c] = em_xstrdup(s->choices[c]);
            x->choices[c] = em_xstrdup(s->choices[c]);
            x->target_scores[c] = s->scores[c];
            if (s->scores[c] > s->scores[best]) best = c;
        }
        for (size_t c = 0; c < s->choice_count; c++) tied += s->scores[c] == s->scores[best];
        x->gold = tied == 1 ? (int)best : -1;
    }
    for (size_t q = 0; q < asked; q++) free(contexts[q]);
    free(slot);
    free(contexts);
    free(queries);
    *out = t;
done:
    em_task_generation_clear(&generation);
    for (i = 0; samples && i < kept; i++) sample_clear(&samples[i]);
    free(samples);
    free(keep);
    free(task);
    return err;
}

static bool is_directory(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The subtasks' task.json paths under dir ("SUBDIR/task.json" sorted as json_task sorts the
 * full paths); *count 0 when there are none. */
static char **subtask_paths(const char *dir, size_t *count) {
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *sub = em_xasprintf("%s/%s", dir, e->d_name);
        char *json = em_xasprintf("%s/task.json", sub);
        if (is_directory(sub) && is_file(json)) {
            if (*count == cap)
                names = em_xrealloc(names, (cap = cap ? 2 * cap : 16) * sizeof *names);
            names[(*count)++] = em_xasprintf("%s/task.json", e->d_name);
        }
        free(json);
        free(sub);
    }
    closedir(d);
    if (*count) qsort(names, *count, sizeof *names, compare_strings);
    return names;
}

static void free_tasks(em_task **tasks, size_t count) {
    for (size_t i = 0; i < count; i++) em_task_free(tasks[i]);
    free(tasks);
}

em_status em_bigbench_load(const char *path, const em_bigbench_options *options, em_task ***tasks,
                           size_t *count) {
    *tasks = NULL;
    *count = 0;
    char *file = is_directory(path) ? em_xasprintf("%s/task.json", path) : em_xstrdup(path);
    char *dir = em_xstrdup(file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    cJSON *data = NULL;
    char *metrics = NULL, *generative = NULL, **subtasks = NULL, *name = NULL;
    size_t subtask_count = 0;
    task_kind kind;
    em_status err = parse_file(file, &data);
    if (err) goto done;
    if (field(data, "examples")) {
        em_task *task;
        err = load_examples(data, file, NULL, options, &task, &kind, &metrics);
        if (!err && !task)
            err = em_error_new(EM_EXIT_BAD_INPUT,
                               "%s: task '%s' is generative (metrics: %s): it loads with "
                               "the task stage's bigbench_generative (evalmesh eval "
                               "--bigbench-generative)",
                               file, field(data, "name")->valuestring, metrics);
        if (!err) {
            *tasks = em_xmalloc(sizeof **tasks);
            (*tasks)[(*count)++] = task;
        }
        goto done;
    }
    const cJSON *task_name = field(data, "name");
    if (!cJSON_IsString(task_name)) {
        err = em_error_new(EM_EXIT_BAD_INPUT, "%s: 'name' is missing or not a string", file);
        goto done;
    }
    name = ascii_name(task_name->valuestring);
    if ((err = check_required(data, file, name))) goto done;
    subtasks = subtask_paths(dir, &subtask_count);
    if (!subtask_count) {
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: task '%s' has neither 'examples' nor subtask "
                           "folders with a task.json",
                           file, name);
        goto done;
    }
    *tasks = em_xmalloc(subtask_count * sizeof **tasks);
    for (size_t i = 0; i < subtask_count && !err; i++) {
        char *sub_file = em_xasprintf("%s/%s", dir, subtasks[i]);
        cJSON *sub = NULL;
        em_task *task = NULL;
        err = parse_file(sub_file, &sub);
        if (!err && !field(sub, "examples"))
            err = field_error(sub_file, name, "examples", "is missing (a subtask needs them)");
        free(metrics);
        metrics = NULL;
        if (!err) err = load_examples(sub, sub_file, name, options, &task, &kind, &metrics);
        for (size_t j = 0; !err && task && j < *count; j++)
            if (strcmp((*tasks)[j]->name, task->name) == 0)
                err = em_error_new(EM_EXIT_BAD_INPUT, "%s: subtask name '%s' is repeated", sub_file,
                                   task->name);
        if (!err && task) (*tasks)[(*count)++] = task;
        if (err) em_task_free(task);
        if (!err && !task) {
            char *more = em_xasprintf("%s%s%s", generative ? generative : "",
                                      generative ? ", " : "", subtasks[i]);
            free(generative);
            generative = more;
        }
        cJSON_Delete(sub);
        free(sub_file);
    }
    if (!err && !*count)
        err = em_error_new(EM_EXIT_BAD_INPUT,
                           "%s: every subtask of task '%s' is generative: they load with "
                           "the task stage's bigbench_generative (evalmesh eval "
                           "--bigbench-generative)",
                           file, name);
    else if (!err && generative)
        em_log_warn(
            "%s: task '%s': generative subtasks left out (bigbench_generative loads them): %s",
            file, name, generative);
done:
    if (err) {
        free_tasks(*tasks, *count);
        *tasks = NULL;
        *count = 0;
    }
    for (size_t i = 0; i < subtask_count; i++) free(subtasks[i]);
    free(subtasks);
    free(generative);
    free(metrics);
    free(name);
    cJSON_Delete(data);
    free(dir);
    free(file);
    return err;
}
