/* An lm-eval task YAML and its JSON Lines splits into an em_task: the keys are read from a table
 * (one row per TaskConfig key: read, accepted without effect, or refused), the documents of each
 * split are parsed line by line, and every example's context is built as lm-eval 0.4.13's
 * fewshot_context builds it: description + for each few-shot document (text + target_delimiter
 * + answer + fewshot_delimiter) + the document's text. A generate_until task also reads its
 * generation_kwargs (until, max_gen_toks; greedy only), its filter_list (one pipeline, from
 * stages/tasks/output_filters.c's table) and exact_match's keyword arguments. */
#include "stages/kinds/support/lm_eval_task.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"
#include "runner/recipe/schema.h"
#include "stages/tasks/doc_template.h"
#include "stages/tasks/mt19937.h"
#include "util/paths.h"
#include "util/regular_file.h"
#include "util/suffix.h"
#include "util/utf8.h"

/* One document of a split. */
typedef struct doc {
    cJSON *json;
    em_doc_source source;
} doc;

typedef struct split {
    char *name;
    doc *docs;
    size_t count;
} split;

/* A doc_to_text, doc_to_target, doc_to_choice or description: a field name or a template (a
 * string), an integer (doc_to_target) or a list of strings (doc_to_choice). */
typedef struct doc_value {
    const char *what;
    em_mark mark;
    const char *text; /* in the YAML tree; NULL when not a string */
    em_doc_template *tmpl;
    bool is_int;
    long long number;
    char **list;
    size_t list_count;
    bool is_list;
} doc_value;

/* What doc_to_target gives for one document. */
typedef enum target_kind { TARGET_INDEX, TARGET_TEXT, TARGET_NONE } target_kind;

typedef struct target {
    target_kind kind;
    long long index;
    char *text;
} target;

typedef struct loader {
    const char *yaml_path;
    const char *yaml_text;
    em_node *root;
    em_task *task;
    doc_value text, target, choice, description;
    bool has_choice;
    const char *target_delimiter, *fewshot_delimiter;
    const char *test_split, *validation_split, *training_split, *fewshot_split;
    bool first_n;
    em_node *data_files;
    split *splits;
    size_t split_count;
} loader;

/* The TaskConfig keys (lm-eval 0.4.13, lm_eval/config/task.py) and what evalmesh does with each.
 */
typedef enum key_use { KEY_READ, KEY_NO_EFFECT, KEY_REFUSED } key_use;

typedef struct task_key {
    const char *name;
    key_use use;
} task_key;

static const task_key task_keys[] = {
    {"task", KEY_READ},
    {"task_alias", KEY_NO_EFFECT},
    {"tag", KEY_NO_EFFECT},
    {"dataset_path", KEY_READ},
    {"dataset_name", KEY_REFUSED},
    {"dataset_kwargs", KEY_READ},
    {"training_split", KEY_READ},
    {"validation_split", KEY_READ},
    {"test_split", KEY_READ},
    {"fewshot_split", KEY_READ},
    {"doc_to_text", KEY_READ},
    {"doc_to_target", KEY_READ},
    {"doc_to_choice", KEY_READ},
    {"description", KEY_READ},
    {"target_delimiter", KEY_READ},
    {"fewshot_delimiter", KEY_READ},
    {"fewshot_config", KEY_READ},
    {"num_fewshot", KEY_READ},
    {"metric_list", KEY_READ},
    {"output_type", KEY_READ},
    {"metadata", KEY_READ},
    {"repeats", KEY_READ},
    {"should_decontaminate", KEY_NO_EFFECT},
    {"doc_to_decontamination_query", KEY_NO_EFFECT},
    {"custom_dataset", KEY_REFUSED},
    {"process_docs", KEY_REFUSED},
    {"doc_to_image", KEY_REFUSED},
    {"doc_to_audio", KEY_REFUSED},
    {"unsafe_code", KEY_REFUSED},
    {"process_results", KEY_REFUSED},
    {"use_prompt", KEY_REFUSED},
    {"generation_kwargs", KEY_READ},
    {"filter_list", KEY_READ},
    {"gen_prefix", KEY_REFUSED},
};

/* The metrics a metric_list may name, per output type, with lm-eval's aggregation of each. */
typedef struct task_metric {
    const char *name;
    em_task_output output;
    unsigned flag;
    const char *aggregation;
} task_metric;

static const task_metric task_metrics[] = {
    {"acc", EM_TASK_MULTIPLE_CHOICE, EM_TASK_METRIC_ACC, "mean"},
    {"acc_norm", EM_TASK_MULTIPLE_CHOICE, EM_TASK_METRIC_ACC_NORM, "mean"},
    {"acc_mutual_info", EM_TASK_MULTIPLE_CHOICE, EM_TASK_METRIC_ACC_MUTUAL_INFO, "mean"},
    {"acc", EM_TASK_LOGLIKELIHOOD, EM_TASK_METRIC_ACC, "mean"},
    {"perplexity", EM_TASK_LOGLIKELIHOOD, EM_TASK_METRIC_PERPLEXITY, "perplexity"},
    {"exact_match", EM_TASK_GENERATE_UNTIL, EM_TASK_METRIC_EXACT_MATCH, "mean"},
};

/* The metrics evalmesh scores for each output type, for messages. */
static const char *metrics_of(em_task_output output) {
    return output == EM_TASK_MULTIPLE_CHOICE ? "acc, acc_norm, acc_mutual_info"
           : output == EM_TASK_LOGLIKELIHOOD ? "perplexity, acc"
                                             : "exact_match";
}

static const char *output_name(em_task_output output) {
    return output == EM_TASK_MULTIPLE_CHOICE ? "multiple_choice"
           : output == EM_TASK_LOGLIKELIHOOD ? "loglikelihood"
                                             : "generate_until";
}

bool em_lm_eval_task_path(const char *arg) {
    return em_ends_with(arg, ".yaml") || em_ends_with(arg, ".yml");
}

static em_status bad_at(em_mark mark, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static em_status bad_at(em_mark mark, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_status err = em_error_newv(EM_EXIT_BAD_INPUT, fmt, ap);
    va_end(ap);
    return em_error_prefix_at(err, mark, "%s", "lm-eval task");
}

/* PyYAML, which lm-eval loads task YAMLs with, follows YAML 1.1: an unquoted yes, no, on, off,
 * ~ or number-like word is not a string there. A plain scalar that might be one must be quoted
 * so both read the same string. */
static bool pyyaml_string(const em_node *node) {
    if (node->quoted) return true;
    static const char *const words[] = {
        "yes",  "Yes", "YES",  "no",   "No",   "NO",    "on",    "On",    "ON",   "off",
        "Off",  "OFF", "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null",
        "NULL", "~",   "",     "y",    "Y",    "n",     "N",     "=",     "<<"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (!strcmp(node->text, words[i])) return false;
    const char *s = node->text;
    if (strchr("+-.0123456789", s[0])) {
        for (; *s; s++)
            if (!strchr("+-._:0123456789abcdefABCDEFoOxXinIN", *s)) return true;
        return false;
    }
    return true;
}

/* The string value of key (NULL when absent); an error when it is not a string both YAML
 * readers agree on. */
static em_status get_string(const em_node *map, const char *key, const char **out) {
    *out = NULL;
    const em_node *node = em_node_get(map, key);
    if (!node) return NULL;
    if (node->kind != EM_NODE_SCALAR || em_node_scalar_type(node) == EM_SCALAR_NULL ||
        !pyyaml_string(node))
        return bad_at(node->mark, "%s must be a string%s", key,
                      node->kind == EM_NODE_SCALAR
                          ? " (quote it: lm-eval reads task YAMLs as YAML 1.1, where this is "
                            "not a string)"
                          : "");
    *out = node->text;
    return NULL;
}

/* Whether the node's text stands verbatim in the file at its mark (after the opening quote),
 * so a template error's column is a column of the file. */
static bool verbatim_at(const loader *ld, const em_node *node, em_mark *content) {
    *content = node->mark;
    /* a template from an included file: its place, not a column inside */
    if (strchr(node->text, '\n') || node->mark.file != em_intern(ld->yaml_path)) return false;
    const char *p = ld->yaml_text;
    for (int line = 1; line < node->mark.line && p; line++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p) return false;
    for (int col = 1; col < node->mark.col && *p && *p != '\n'; col++) {
        int n = 1;
        em_utf8_decode(p, &n);
        p += n;
    }
    if (node->quoted && (*p == '"' || *p == '\'')) {
        p++;
        content->col++;
    }
    size_t len = strlen(node->text);
    return !strncmp(p, node->text, len) && (p[len] == '"' || p[len] == '\'' || !node->quoted);
}

static em_status read_doc_value(loader *ld, const char *key, bool allow_int, bool allow_list,
                                doc_value *v) {
    v->what = key;
    const em_node *node = em_node_get(ld->root, key);
    if (!node) return NULL;
    v->mark = node->mark;
    /* a list of choices, or a map whose values are the choices (lm-eval's list(dict.values())) */
    if (allow_list && (node->kind == EM_NODE_SEQ || node->kind == EM_NODE_MAP)) {
        v->is_list = true;
        v->list = em_xcalloc(node->count + 1, sizeof *v->list);
        for (size_t i = 0; i < node->count; i++) {
            const em_node *item =
                node->kind == EM_NODE_SEQ ? node->items[i] : node->entries[i].value;
            if (item->kind != EM_NODE_SCALAR || !pyyaml_string(item) ||
                em_node_scalar_type(item) == EM_SCALAR_NULL)
                return bad_at(item->mark,
                              "%s: every choice must be a string (quote it: lm-eval "
                              "reads task YAMLs as YAML 1.1)",
                              key);
            v->list[v->list_count++] = em_xstrdup(item->text);
        }
        return NULL;
    }
    if (allow_int && node->kind == EM_NODE_SCALAR && !node->quoted &&
        em_node_scalar_type(node) == EM_SCALAR_INT) {
        /* YAML 1.1 reads 010 as 8 and 0o10 as a string: only plain decimals mean the same */
        const char *digits = node->text + (node->text[0] == '-');
        if ((digits[0] == '0' && digits[1]) || strspn(digits, "0123456789") != strlen(digits))
            return bad_at(node->mark,
                          "%s: write the index in plain decimal (lm-eval reads task "
                          "YAMLs as YAML 1.1)",
                          key);
        int64_t n;
        em_status err = em_node_as_int(node, &n);
        if (err) return err;
        v->is_int = true;
        v->number = n;
        return NULL;
    }
    em_status err = get_string(ld->root, key, &v->text);
    if (err) return err;
    em_mark content;
    bool verbatim = verbatim_at(ld, node, &content);
    return em_doc_template_parse(v->text, key, content, verbatim, &v->tmpl);
}

static void doc_value_clear(doc_value *v) {
    em_doc_template_free(v->tmpl);
    for (size_t i = 0; i < v->list_count; i++) free(v->list[i]);
    free(v->list);
}

static em_status doc_error(const doc *d, const doc_value *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static em_status doc_error(const doc *d, const doc_value *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_status err = em_error_newv(EM_EXIT_BAD_INPUT, fmt, ap);
    va_end(ap);
    char where[512];
    em_mark at = {em_intern(d->source.data_file), d->source.line, 0};
    return em_error_prefix_at(err, at, "document %zu: %s (%s)", d->source.doc_index, v->what,
                              em_mark_format(v->mark, where, (int)sizeof where));
}

/* lm-eval takes the value as a field when it names one of the document's fields. */
static const cJSON *as_field(const doc_value *v, const doc *d) {
    return v->text ? cJSON_GetObjectItemCaseSensitive(d->json, v->text) : NULL;
}

/* Python's str.isdigit over ASCII, and ast.literal_eval's rule against leading zeros. */
static bool decimal_text(const char *s, long long *out) {
    if (!*s) return false;
    long long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000000000000LL) return false;
        v = v * 10 + (*p - '0');
    }
    if (s[0] == '0' && v != 0) return false;
    *out = v;
    return true;
}

/* doc_to_text and description: a string. */
static em_status value_text(const loader *ld, const doc_value *v, const doc *d, char **out) {
    const cJSON *field = as_field(v, d);
    if (field) {
        if (!cJSON_IsString(field))
            return doc_error(d, v, "the field '%s' is not a string", v->text);
        *out = em_xstrdup(field->valuestring);
        return NULL;
    }
    em_status err = em_doc_template_render(v->tmpl, d->json, &d->source, out);
    long long n;
    if (!err && v == &ld->text && ld->has_choice && decimal_text(*out, &n)) {
        free(*out);
        *out = NULL;
        return doc_error(d, v,
                         "the text is a number, which lm-eval takes as a multiple-input "
                         "task (evalmesh does not support those)");
    }
    return err;
}

static em_status choices_of(const cJSON *list, const doc *d, const doc_value *v, char ***out,
                            size_t *count) {
    if (!cJSON_IsArray(list)) return doc_error(d, v, "the choices are not a list");
    size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
    char **choices = em_xcalloc(n + 1, sizeof *choices);
    for (const cJSON *item = list->child; item; item = item->next, i++) {
        if (!cJSON_IsString(item)) {
            for (size_t j = 0; j < i; j++) free(choices[j]);
            free(choices);
            return doc_error(d, v, "choice %zu is not a string", i);
        }
        choices[i] = em_xstrdup(item->valuestring);
    }
    *out = choices;
    *count = n;
    return NULL;
}

static em_status value_choices(const doc_value *v, const doc *d, char ***out, size_t *count) {
    if (v->is_list) {
        *out = em_xcalloc(v->list_count + 1, sizeof **out);
        for (size_t i = 0; i < v->list_count; i++) (*out)[i] = em_xstrdup(v->list[i]);
        *count = v->list_count;
        return NULL;
    }
    const cJSON *field = as_field(v, d);
    if (field) return choices_of(field, d, v, out, count);
    if (!em_doc_template_is_expression(v->tmpl))
        return doc_error(d, v,
                         "a template giving the choices must be one {{ expression }} "
                         "giving a list");
    cJSON *list;
    em_status err = em_doc_template_evaluate(v->tmpl, d->json, &d->source, &list);
    if (err) return err;
    err = choices_of(list, d, v, out, count);
    cJSON_Delete(list);
    return err;
}

static em_status value_target(const loader *ld, const doc_value *v, const doc *d, target *out) {
    *out = (target){TARGET_NONE, 0, NULL};
    if (v->is_int) {
        *out = (target){TARGET_INDEX, v->number, NULL};
        return NULL;
    }
    const cJSON *field = as_field(v, d);
    if (field) {
        if (cJSON_IsNull(field)) return NULL;
        if (cJSON_IsBool(field))
            *out = (target){TARGET_INDEX, cJSON_IsTrue(field), NULL};
        else if (cJSON_IsNumber(field) && !(field->type & EM_JSON_FLOAT) &&
                 fabs(field->valuedouble) < 9007199254740992.0 &&
                 field->valuedouble == floor(field->valuedouble))
            *out = (target){TARGET_INDEX, (long long)field->valuedouble, NULL};
        else if (cJSON_IsString(field))
            *out = (target){TARGET_TEXT, 0, em_xstrdup(field->valuestring)};
        else
            return doc_error(d, v, "the field '%s' is not an integer or a string", v->text);
        return NULL;
    }
    char *s;
    em_status err = em_doc_template_render(v->tmpl, d->json, &d->source, &s);
    if (err) return err;
    long long n;
    size_t len = strlen(s);
    if (ld->has_choice && decimal_text(s, &n)) {
        *out = (target){TARGET_INDEX, n, NULL};
        free(s);
    } else if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        free(s);
        return doc_error(d, v, "the target is a list (several targets are not supported)");
    } else {
        *out = (target){TARGET_TEXT, 0, s};
    }
    return NULL;
}

/* ---- data ---- */

/* Depth first: the numbers of item take the flags fraction[*next...] in turn. */
static void mark_numbers(cJSON *item, const bool *fraction, size_t count, size_t *next) {
    if (cJSON_IsNumber(item) && *next < count && fraction[(*next)++]) item->type |= EM_JSON_FLOAT;
    for (cJSON *child = item->child; child; child = child->next)
        mark_numbers(child, fraction, count, next);
}

/* Marks the numbers of json that its text writes with a fraction or an exponent: the number
 * tokens of the text come in the order of a depth-first walk of the tree. */
static void mark_written_floats(const char *s, size_t len, cJSON *json) {
    bool *fraction = NULL;
    size_t count = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') {
            for (i++; i < len && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
        } else if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
            bool f = false;
            for (; i + 1 < len && s[i + 1] && strchr("0123456789.eE+-", s[i + 1]); i++)
                f |= strchr(".eE", s[i + 1]) != NULL;
            fraction = em_xrealloc(fraction, (count + 1) * sizeof *fraction);
            fraction[count++] = f;
        }
    }
    size_t next = 0;
    mark_numbers(json, fraction, count, &next);
    free(fraction);
}

/* The paths of a document's fields ("choices\x1ftext[]") holding EM_JSON_FLOAT numbers. */
typedef struct float_paths {
    char **paths;
    size_t count;
} float_paths;

static bool has_path(const float_paths *fp, const char *path) {
    for (size_t i = 0; i < fp->count; i++)
        if (!strcmp(fp->paths[i], path)) return true;
    return false;
}

/* collect: adds the paths of float numbers to fp; otherwise marks every number at one of them
 * (datasets gives a column one type: an integer where other documents have 1.5 is 1.0). */
static void walk_float_paths(cJSON *item, const char *path, float_paths *fp, bool collect) {
    if (cJSON_IsNumber(item)) {
        if (collect && (item->type & EM_JSON_FLOAT) && !has_path(fp, path)) {
            fp->paths = em_xrealloc(fp->paths, (fp->count + 1) * sizeof *fp->paths);
            fp->paths[fp->count++] = em_xstrdup(path);
        } else if (!collect && has_path(fp, path)) {
            item->type |= EM_JSON_FLOAT;
        }
    }
    for (cJSON *child = item->child; child; child = child->next) {
        char *sub = cJSON_IsArray(item) ? em_xasprintf("%s[]", path)
                                        : em_xasprintf("%s\x1f%s", path, child->string);
        walk_float_paths(child, sub, fp, collect);
        free(sub);
    }
}

static void mark_float_columns(loader *ld) {
    float_paths fp = {NULL, 0};
    for (int collect = 1; collect >= 0; collect--)
        for (size_t i = 0; i < ld->split_count; i++)
            for (size_t j = 0; j < ld->splits[i].count; j++)
                walk_float_paths(ld->splits[i].docs[j].json, "", &fp, collect);
    for (size_t i = 0; i < fp.count; i++) free(fp.paths[i]);
    free(fp.paths);
}

static em_status read_jsonl(const char *path, split *sp) {
    char *text;
    size_t len;
    em_status err =
        em_read_regular_file(path, EM_TEXT_MAX_BYTES, "a task's data file", &text, &len);
    if (err) return err;
    const char *file = em_intern(path);
    size_t bad = em_utf8_invalid_offset(text, len);
    int line = 1;
    for (size_t start = 0; start < len && !err; line++) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        const char *s = text + start;
        size_t n = end - start;
        size_t blank = 0;
        while (blank < n && strchr(" \t\r", s[blank])) blank++;
        if (bad >= start && bad < end) {
            err = em_error_at(EM_EXIT_BAD_INPUT, (em_mark){file, line, 0},
                              "the line is not valid UTF-8");
        } else if (blank < n) {
            const char *parse_end = NULL;
            cJSON *json = cJSON_ParseWithLengthOpts(s, n, &parse_end, false);
            size_t rest = json ? (size_t)(parse_end - s) : 0;
            while (json && rest < n && strchr(" \t\r", s[rest])) rest++;
            if (!json || rest < n || !cJSON_IsObject(json)) {
                cJSON_Delete(json);
                err = em_error_at(EM_EXIT_BAD_INPUT, (em_mark){file, line, 0},
                                  "not a JSON object on one line (JSON Lines: one document a "
                                  "line)");
            } else {
                sp->docs = em_xrealloc(sp->docs, (sp->count + 1) * sizeof *sp->docs);
                mark_written_floats(s, n, json);
                sp->docs[sp->count] = (doc){json, {file, line, sp->count}};
                sp->count++;
            }
        }
        start = end + 1;
    }
    free(text);
    return err;
}

/* The files of split `name` from dataset_kwargs.data_files: a map of split names to a path or a
 * list of paths, or a path or list (the split "train"), as datasets' json loader takes them. */
static em_status load_split(loader *ld, const char *name, split **out) {
    for (size_t i = 0; i < ld->split_count; i++) {
        if (!strcmp(ld->splits[i].name, name)) {
            *out = &ld->splits[i];
            return NULL;
        }
    }
    const em_node *files = ld->data_files;
    if (files->kind == EM_NODE_MAP)
        files = em_node_get(files, name);
    else if (strcmp(name, "train") != 0)
        files = NULL;
    if (!files)
        return bad_at(ld->data_files->mark, "dataset_kwargs.data_files has no split '%s'", name);
    ld->splits = em_xrealloc(ld->splits, (ld->split_count + 1) * sizeof *ld->splits);
    split *sp = &ld->splits[ld->split_count++];
    *sp = (split){em_xstrdup(name), NULL, 0};
    size_t n = files->kind == EM_NODE_SEQ ? files->count : 1;
    for (size_t i = 0; i < n; i++) {
        const em_node *f = files->kind == EM_NODE_SEQ ? files->items[i] : files;
        if (f->kind != EM_NODE_SCALAR || em_node_scalar_type(f) == EM_SCALAR_NULL)
            return bad_at(f->mark, "a data file must be a path");
        char *path = em_path_beside(f->mark.file, f->text);
        em_status err = read_jsonl(path, sp);
        free(path);
        if (err) return em_error_prefix_at(err, f->mark, "split '%s'", name);
    }
    if (!sp->count) return bad_at(files->mark, "split '%s' has no documents", name);
    *out = sp;
    return NULL;
}

/* ---- the YAML ---- */

enum { MAX_INCLUDE_DEPTH = 16 };

/* The files being included, outermost first (for cycles). */
typedef struct include_chain {
    const char *paths[MAX_INCLUDE_DEPTH + 1];
    int depth;
} include_chain;

/* lm-eval's load_yaml: `include:` names files (relative to the including one, each resolved the
 * same way) whose keys come first, in the order listed; the including file's own keys win. The
 * merge is shallow: a map the including file sets replaces the included one whole. */
static em_status merge_includes(em_node **root, include_chain *chain) {
    const em_node *include = em_node_get(*root, "include");
    if (!include) return NULL;
    if (chain->depth >= MAX_INCLUDE_DEPTH)
        return bad_at(include->mark, "includes nest deeper than %d", MAX_INCLUDE_DEPTH);
    em_node *merged = em_node_new_map((*root)->mark);
    size_t n = include->kind == EM_NODE_SEQ ? include->count : 1;
    em_status err = NULL;
    for (size_t i = 0; i < n && !err; i++) {
        const em_node *name = include->kind == EM_NODE_SEQ ? include->items[i] : include;
        if (name->kind != EM_NODE_SCALAR || em_node_scalar_type(name) == EM_SCALAR_NULL) {
            err = bad_at(name->mark, "include names a task YAML");
            break;
        }
        char *path = em_path_beside(name->mark.file, name->text);
        for (int k = 0; k <= chain->depth && !err; k++)
            if (!strcmp(chain->paths[k], path))
                err = bad_at(name->mark, "include cycle: '%s' includes itself", path);
        if (err) {
            free(path);
            break;
        }
        em_node *included = NULL;
        char *text;
        size_t len;
        err = em_read_regular_file(path, EM_RECIPE_MAX_BYTES, "a task YAML", &text, &len);
        if (!err) {
            err = em_yaml_parse(text, len, path, &included);
            free(text);
        }
        if (!err && included->kind != EM_NODE_MAP)
            err = bad_at(included->mark, "a task YAML must be a map");
        if (!err) {
            chain->paths[++chain->depth] = path;
            err = merge_includes(&included, chain);
            chain->depth--;
        }
        for (size_t k = 0; !err && k < included->count; k++)
            if (strcmp(included->entries[k].key, "task_list") != 0)
                em_node_map_set(merged, included->entries[k].key, included->entries[k].key_mark,
                                em_node_clone(included->entries[k].value));
        em_node_free(included);
        if (err) err = em_error_prefix_at(err, name->mark, "include '%s'", name->text);
        free(path);
    }
    for (size_t k = 0; !err && k < (*root)->count; k++)
        if (strcmp((*root)->entries[k].key, "include") != 0)
            em_node_map_set(merged, (*root)->entries[k].key, (*root)->entries[k].key_mark,
                            em_node_clone((*root)->entries[k].value));
    if (err) {
        em_node_free(merged);
        return err;
    }
    em_node_free(*root);
    *root = merged;
    return NULL;
}

static em_status check_keys(const loader *ld) {
    const char *names[sizeof task_keys / sizeof *task_keys];
    for (size_t i = 0; i < sizeof task_keys / sizeof *task_keys; i++) names[i] = task_keys[i].name;
    for (size_t i = 0; i < ld->root->count; i++) {
        const em_map_entry *e = &ld->root->entries[i];
        const task_key *row = NULL;
        for (size_t j = 0; j < sizeof task_keys / sizeof *task_keys; j++)
            if (!strcmp(task_keys[j].name, e->key)) row = &task_keys[j];
        if (!row) {
            const char *close = em_did_you_mean(e->key, names, sizeof names / sizeof *names);
            return bad_at(e->key_mark, "unknown key '%s'%s%s%s", e->key,
                          close ? " (did you mean '" : "", close ? close : "", close ? "'?)" : "");
        }
        if (row->use == KEY_REFUSED)
            return bad_at(e->key_mark, "'%s' is not supported by evalmesh (docs/tasks.md)", e->key);
    }
    return NULL;
}

/* A YAML boolean (PyYAML's true/false) at node, for key. */
static em_status get_bool(const em_node *node, const char *key, bool *out) {
    if (node->kind != EM_NODE_SCALAR || em_node_scalar_type(node) != EM_SCALAR_BOOL)
        return bad_at(node->mark, "%s must be true or false", key);
    return em_node_as_bool(node, out);
}

/* A string scalar both YAML readers agree on, for key. */
static em_status string_node(const em_node *node, const char *key, const char **out) {
    if (node->kind != EM_NODE_SCALAR || em_node_scalar_type(node) == EM_SCALAR_NULL ||
        !pyyaml_string(node))
        return bad_at(node->mark, "%s must be a string (quote it)", key);
    *out = node->text;
    return NULL;
}

/* "file:line:col: lm-eval task: key", naming what is compiled from node in messages. */
static char *place_of(const char *key, const em_node *node) {
    char where[1024];
    em_mark_format(node->mark, where, sizeof where);
    return em_xasprintf("%s: lm-eval task: %s", where, key);
}

/* A Python regular expression at node (a string), compiled. */
static em_status regex_node(const em_node *node, const char *key, em_python_regex **out) {
    const char *pattern;
    em_status err = string_node(node, key, &pattern);
    if (err) return err;
    char *place = place_of(key, node);
    err = em_python_regex_compile(pattern, place, out);
    free(place);
    return err;
}

/* One keyword argument of exact_match (lm_eval/api/metrics.py exact_match_hf_evaluate); *known
 * false when e is none of them. */
static em_status read_exact_match_kwarg(const em_map_entry *e, em_exact_match_options *o,
                                        bool *known) {
    *known = true;
    if (!strcmp(e->key, "ignore_case")) return get_bool(e->value, e->key, &o->ignore_case);
    if (!strcmp(e->key, "ignore_punctuation"))
        return get_bool(e->value, e->key, &o->ignore_punctuation);
    if (!strcmp(e->key, "ignore_numbers")) return get_bool(e->value, e->key, &o->ignore_numbers);
    if (strcmp(e->key, "regexes_to_ignore") != 0) {
        *known = false;
        return NULL;
    }
    if (e->value->kind != EM_NODE_SEQ)
        return bad_at(e->value->mark, "regexes_to_ignore must be a list of strings");
    for (size_t i = 0; i < e->value->count; i++) {
        o->regexes_to_ignore =
            em_xrealloc(o->regexes_to_ignore, (o->regex_count + 1) * sizeof *o->regexes_to_ignore);
        em_status err = regex_node(e->value->items[i], "regexes_to_ignore",
                                   &o->regexes_to_ignore[o->regex_count]);
        if (err) return err;
        o->regex_count++;
    }
    return NULL;
}

/* lm-eval's default max_gen_toks (lm_eval/defaults.py DEFAULT_MAX_GEN_TOKS). */
enum { LM_EVAL_MAX_GEN_TOKS = 256 };

/* generation_kwargs (TaskConfig.__post_init__, normalize_gen_kwargs): until (a string or a list
 * of strings; absent: the fewshot_delimiter), max_gen_toks (absent: 256), do_sample false and
 * temperature 0 only (evalmesh decodes greedily). */
static em_status read_generation_kwargs(loader *ld) {
    em_task_generation *g = &ld->task->generation;
    const em_node *kwargs = em_node_get(ld->root, "generation_kwargs");
    const em_node *until = kwargs ? em_node_get(kwargs, "until") : NULL;
    g->max_gen_toks = LM_EVAL_MAX_GEN_TOKS;
    if (kwargs && kwargs->kind != EM_NODE_MAP)
        return bad_at(kwargs->mark, "generation_kwargs must be a map");
    for (size_t i = 0; kwargs && i < kwargs->count; i++) {
        const em_map_entry *e = &kwargs->entries[i];
        em_status err = NULL;
        if (!strcmp(e->key, "until")) continue;
        if (!strcmp(e->key, "max_gen_toks")) {
            int64_t n;
            if ((err = em_node_as_int(e->value, &n))) return err;
            if (n < 1 || n > 1000000)
                return bad_at(e->value->mark, "max_gen_toks must be 1 to 1000000");
            g->max_gen_toks = (int)n;
        } else if (!strcmp(e->key, "do_sample")) {
            bool sample;
            if ((err = get_bool(e->value, e->key, &sample))) return err;
            if (sample)
                return bad_at(e->value->mark, "do_sample: true is not supported: evalmesh "
                                              "decodes greedily (do_sample: false)");
        } else if (!strcmp(e->key, "temperature")) {
            double temperature;
            if ((err = em_node_as_double(e->value, &temperature))) return err;
            if (temperature != 0)
                return bad_at(e->value->mark,
                              "temperature %s is not supported: evalmesh decodes "
                              "greedily (temperature 0)",
                              e->value->text);
        } else {
            return bad_at(e->key_mark,
                          "generation_kwargs: '%s' is not supported (until, max_gen_toks, "
                          "do_sample: false, temperature: 0)",
                          e->key);
        }
    }
    if (!until) {
        g->until = em_xcalloc(1, sizeof *g->until);
        g->until[g->until_count++] = em_xstrdup(ld->fewshot_delimiter);
        return NULL;
    }
    size_t n = until->kind == EM_NODE_SEQ ? until->count : 1;
    g->until = em_xcalloc(n ? n : 1, sizeof *g->until);
    for (size_t i = 0; i < n; i++) {
        const char *stop;
        em_status err =
            string_node(until->kind == EM_NODE_SEQ ? until->items[i] : until, "until", &stop);
        if (err) return err;
        g->until[g->until_count++] = em_xstrdup(stop);
    }
    return NULL;
}

/* One filter of a filter_list entry: {function: NAME, its keyword arguments}. */
static em_status read_filter_step(const em_node *f, em_filter_step *step) {
    const em_node *function = f->kind == EM_NODE_MAP ? em_node_get(f, "function") : NULL;
    const char *name;
    if (!function) return bad_at(f->mark, "a filter needs 'function: NAME'");
    em_status err = string_node(function, "function", &name);
    if (err) return err;
    const em_output_filter_row *row = em_output_filter_find(name);
    if (!row) {
        const char *names[16];
        for (size_t i = 0; i < em_output_filter_row_count; i++)
            names[i] = em_output_filter_rows[i].name;
        const char *close = em_did_you_mean(name, names, em_output_filter_row_count);
        return bad_at(function->mark,
                      "unsupported filter '%s'%s%s%s (evalmesh: regex, "
                      "remove_whitespace, lowercase, uppercase, take_first)",
                      name, close ? " (did you mean '" : "", close ? close : "",
                      close ? "'?)" : "");
    }
    for (size_t i = 0; i < f->count; i++) {
        const em_map_entry *e = &f->entries[i];
        bool known = !strcmp(e->key, "function");
        for (const char *const *p = row->params; *p && !known; p++) known = !strcmp(*p, e->key);
        if (!known) return bad_at(e->key_mark, "filter '%s' takes no '%s'", row->name, e->key);
    }
    if (strcmp(row->name, "regex") != 0) {
        step->row = row;
        return NULL;
    }
    const em_node *pattern = em_node_get(f, "regex_pattern");
    const em_node *group = em_node_get(f, "group_select");
    const em_node *fallback = em_node_get(f, "fallback");
    const char *pattern_text = NULL, *fallback_text = NULL;
    int64_t group_select = 0;
    if (pattern && (err = string_node(pattern, "regex_pattern", &pattern_text))) return err;
    if (fallback && (err = string_node(fallback, "fallback", &fallback_text))) return err;
    if (group && (err = em_node_as_int(group, &group_select))) return err;
    char *place = place_of("regex_pattern", pattern ? pattern : function);
    err = em_filter_step_regex(pattern_text, (long)group_select, fallback_text, place, step);
    free(place);
    return err;
}

/* filter_list: one entry {name, filter: [steps]} (lm-eval runs every entry and reports each;
 * evalmesh scores one); absent: lm-eval's "none" pipeline, take_first. */
static em_status read_filter_list(loader *ld) {
    em_filter_pipeline *p = &ld->task->generation.filter;
    const em_node *list = em_node_get(ld->root, "filter_list");
    if (!list) {
        p->name = em_xstrdup("none");
        p->steps = em_xcalloc(1, sizeof *p->steps);
        p->steps[p->step_count++].row = em_output_filter_find("take_first");
        return NULL;
    }
    if (list->kind != EM_NODE_SEQ || list->count == 0)
        return bad_at(list->mark, "filter_list must be a list of {name, filter}");
    if (list->count > 1)
        return bad_at(list->items[1]->mark,
                      "filter_list has %zu entries; evalmesh scores one filter pipeline per task",
                      list->count);
    const em_node *entry = list->items[0];
    const em_node *name = entry->kind == EM_NODE_MAP ? em_node_get(entry, "name") : NULL;
    const em_node *steps = entry->kind == EM_NODE_MAP ? em_node_get(entry, "filter") : NULL;
    if (!name || !steps || steps->kind != EM_NODE_SEQ || steps->count == 0)
        return bad_at(entry->mark, "a filter_list entry needs 'name' and a list 'filter'");
    for (size_t i = 0; i < entry->count; i++)
        if (strcmp(entry->entries[i].key, "name") && strcmp(entry->entries[i].key, "filter"))
            return bad_at(entry->entries[i].key_mark, "a filter_list entry takes only name and "
                                                      "filter");
    const char *name_text;
    em_status err = string_node(name, "name", &name_text);
    if (err) return err;
    p->name = em_xstrdup(name_text);
    p->steps = em_xcalloc(steps->count, sizeof *p->steps);
    for (size_t i = 0; i < steps->count; i++) {
        if (i > 0 && !strcmp(p->steps[i - 1].row->name, "take_first"))
            return bad_at(steps->items[i]->mark,
                          "a filter after take_first is not supported (lm-eval would run it on "
                          "the characters of the text)");
        if ((err = read_filter_step(steps->items[i], &p->steps[i]))) return err;
        p->step_count++;
    }
    return NULL;
}

static em_status read_metrics(loader *ld) {
    em_task *t = ld->task;
    const em_node *list = em_node_get(ld->root, "metric_list");
    if (!list) {
        t->metrics =
            t->output == EM_TASK_MULTIPLE_CHOICE ? EM_TASK_METRIC_ACC | EM_TASK_METRIC_ACC_NORM
            : t->output == EM_TASK_LOGLIKELIHOOD ? EM_TASK_METRIC_PERPLEXITY | EM_TASK_METRIC_ACC
                                                 : EM_TASK_METRIC_EXACT_MATCH;
        return NULL;
    }
    if (list->kind != EM_NODE_SEQ) return bad_at(list->mark, "metric_list must be a list");
    for (size_t i = 0; i < list->count; i++) {
        const em_node *entry = list->items[i];
        const em_node *name = em_node_get(entry, "metric");
        if (!name || name->kind != EM_NODE_SCALAR)
            return bad_at(entry->mark, "a metric_list entry needs 'metric: NAME'");
        const task_metric *row = NULL;
        for (size_t j = 0; j < sizeof task_metrics / sizeof *task_metrics; j++)
            if (task_metrics[j].output == t->output && !strcmp(task_metrics[j].name, name->text))
                row = &task_metrics[j];
        if (!row)
            return bad_at(name->mark, "unsupported metric '%s' for output_type %s (evalmesh: %s)",
                          name->text, output_name(t->output), metrics_of(t->output));
        for (size_t k = 0; k < entry->count; k++) {
            const em_map_entry *e = &entry->entries[k];
            if (!strcmp(e->key, "metric") || !strcmp(e->key, "higher_is_better")) continue;
            if (!strcmp(e->key, "aggregation") && e->value->kind == EM_NODE_SCALAR &&
                !strcmp(e->value->text, row->aggregation))
                continue;
            if (row->flag == EM_TASK_METRIC_EXACT_MATCH) {
                bool known = true;
                em_status err = read_exact_match_kwarg(e, &t->generation.exact_match, &known);
                if (err) return err;
                if (known) continue;
            }
            return bad_at(e->key_mark,
                          "metric '%s': '%s' is not supported (aggregation: %s "
                          "only%s)",
                          row->name, e->key, row->aggregation,
                          row->flag == EM_TASK_METRIC_EXACT_MATCH
                              ? "; ignore_case, ignore_punctuation, ignore_numbers, "
                                "regexes_to_ignore"
                              : "");
        }
        t->metrics |= row->flag;
    }
    return NULL;
}

static em_status read_config(loader *ld, int num_fewshot) {
    em_node *root = ld->root;
    em_task *t = ld->task;
    em_status err;
    if (root->kind != EM_NODE_MAP) return bad_at(root->mark, "a task YAML must be a map");
    if ((err = check_keys(ld))) return err;
    const char *s;
    if ((err = get_string(root, "task", &s))) return err;
    if (!s) return bad_at(root->mark, "the task has no 'task' name");
    t->name = em_xstrdup(s);
    const em_node *version = em_node_get_path(root, "metadata.version");
    t->version = em_xstrdup(version && version->kind == EM_NODE_SCALAR ? version->text : "Yaml");

    const em_node *output = em_node_get(root, "output_type");
    const char *output_name = output && output->kind == EM_NODE_SCALAR ? output->text : NULL;
    if (output_name && !strcmp(output_name, "multiple_choice")) {
        t->output = EM_TASK_MULTIPLE_CHOICE;
    } else if (output_name && !strcmp(output_name, "loglikelihood")) {
        t->output = EM_TASK_LOGLIKELIHOOD;
    } else if (!output_name || !strcmp(output_name, "generate_until")) {
        t->output = EM_TASK_GENERATE_UNTIL; /* lm-eval's default */
    } else {
        return bad_at(output->mark,
                      "unsupported output_type '%s' (multiple_choice, loglikelihood or "
                      "generate_until)",
                      output_name);
    }
    for (size_t i = 0; t->output != EM_TASK_GENERATE_UNTIL && i < root->count; i++)
        if (!strcmp(root->entries[i].key, "generation_kwargs") ||
            !strcmp(root->entries[i].key, "filter_list"))
            return bad_at(root->entries[i].key_mark, "'%s' is for output_type generate_until",
                          root->entries[i].key);
    if ((err = read_metrics(ld))) return err;

    const em_node *repeats = em_node_get(root, "repeats");
    if (repeats && (repeats->kind != EM_NODE_SCALAR || strcmp(repeats->text, "1") != 0))
        return bad_at(repeats->mark, "repeats must be 1");

    const em_node *path = em_node_get(root, "dataset_path");
    if (!path || path->kind != EM_NODE_SCALAR || strcmp(path->text, "json") != 0)
        return bad_at(path ? path->mark : root->mark,
                      "dataset_path must be json: evalmesh reads local JSON Lines files named by "
                      "dataset_kwargs.data_files");
    const em_node *kwargs = em_node_get(root, "dataset_kwargs");
    ld->data_files = kwargs ? em_node_get(kwargs, "data_files") : NULL;
    if (!ld->data_files)
        return bad_at(kwargs ? kwargs->mark : root->mark, "dataset_kwargs.data_files is missing");
    for (size_t i = 0; i < kwargs->count; i++)
        if (strcmp(kwargs->entries[i].key, "data_files") != 0)
            return bad_at(kwargs->entries[i].key_mark,
                          "dataset_kwargs: only data_files is supported");

    if ((err = get_string(root, "test_split", &ld->test_split)) ||
        (err = get_string(root, "validation_split", &ld->validation_split)) ||
        (err = get_string(root, "training_split", &ld->training_split)) ||
        (err = get_string(root, "fewshot_split", &ld->fewshot_split)))
        return err;
    const em_node *fewshot = em_node_get(root, "fewshot_config");
    if (fewshot && fewshot->kind != EM_NODE_MAP)
        return bad_at(fewshot->mark, "fewshot_config must be a map");
    if (fewshot) {
        for (size_t i = 0; i < fewshot->count; i++) {
            const em_map_entry *e = &fewshot->entries[i];
            if (!strcmp(e->key, "sampler") && e->value->kind == EM_NODE_SCALAR &&
                (!strcmp(e->value->text, "default") || !strcmp(e->value->text, "first_n"))) {
                ld->first_n = !strcmp(e->value->text, "first_n");
            } else if (!strcmp(e->key, "split")) {
                if ((err = get_string(fewshot, "split", &ld->fewshot_split))) return err;
            } else {
                return bad_at(e->key_mark, "fewshot_config: only sampler (default or first_n) "
                                           "and split are supported");
            }
        }
    }

    /* simple_evaluate: --num_fewshot overrides the YAML's, except a YAML that says 0 */
    int64_t yaml_shots = -1;
    const em_node *shots = em_node_get(root, "num_fewshot");
    if (shots && !em_node_is_null(shots)) {
        if ((err = em_node_as_int(shots, &yaml_shots))) return err;
        if (yaml_shots < 0 || yaml_shots > 1000)
            return bad_at(shots->mark, "num_fewshot must be 0 to 1000");
    }
    t->num_fewshot = num_fewshot >= 0 && yaml_shots != 0 ? num_fewshot
                     : yaml_shots >= 0                   ? (int)yaml_shots
                                                         : 0;

    ld->target_delimiter = " ";
    ld->fewshot_delimiter = "\n\n";
    const char *d;
    if ((err = get_string(root, "target_delimiter", &d))) return err;
    if (d) ld->target_delimiter = d;
    if ((err = get_string(root, "fewshot_delimiter", &d))) return err;
    if (d) ld->fewshot_delimiter = d;
    if (t->output == EM_TASK_GENERATE_UNTIL &&
        ((err = read_generation_kwargs(ld)) || (err = read_filter_list(ld))))
        return err;

    if ((err = read_doc_value(ld, "doc_to_text", false, false, &ld->text)) ||
        (err = read_doc_value(ld, "doc_to_target", true, false, &ld->target)) ||
        (err = read_doc_value(ld, "doc_to_choice", false, true, &ld->choice)) ||
        (err = read_doc_value(ld, "description", false, false, &ld->description)))
        return err;
    if (!ld->text.tmpl) return bad_at(root->mark, "doc_to_text is missing");
    if (!ld->target.tmpl && !ld->target.is_int)
        return bad_at(root->mark, "doc_to_target is missing");
    ld->has_choice = ld->choice.tmpl || ld->choice.is_list;
    if (t->output == EM_TASK_MULTIPLE_CHOICE && !ld->has_choice)
        return bad_at(root->mark, "a multiple_choice task needs doc_to_choice");
    return NULL;
}

/* ---- examples ---- */

static void append(char **s, size_t *len, const char *piece) {
    size_t n = strlen(piece);
    *s = em_xrealloc(*s, *len + n + 1);
    memcpy(*s + *len, piece, n + 1);
    *len += n;
}

/* A few-shot document's answer: the choice its target indexes, or its target text. */
static em_status fewshot_turn(const loader *ld, const doc *d, char **ctx, size_t *len) {
    char *q = NULL, **choices = NULL;
    size_t choice_count = 0;
    target a = {TARGET_NONE, 0, NULL};
    em_status err = value_text(ld, &ld->text, d, &q);
    if (!err && ld->has_choice) err = value_choices(&ld->choice, d, &choices, &choice_count);
    if (!err) err = value_target(ld, &ld->target, d, &a);
    if (!err) {
        append(ctx, len, q);
        /* lm-eval's build_qa_turn: no answer (None or "") adds no delimiters either */
        bool has_answer = a.kind == TARGET_INDEX || (a.kind == TARGET_TEXT && a.text[0]);
        if (has_answer) {
            const char *answer = a.text;
            if (a.kind == TARGET_INDEX) {
                if (!choice_count || a.index < 0 || a.index >= (long long)choice_count)
                    err = doc_error(d, &ld->target,
                                    "target %lld is out of range of the %zu "
                                    "choices",
                                    a.index, choice_count);
                else
                    answer = choices[a.index];
            }
            if (!err) {
                append(ctx, len, ld->target_delimiter);
                append(ctx, len, answer);
                append(ctx, len, ld->fewshot_delimiter);
            }
        }
    }
    free(q);
    for (size_t i = 0; i < choice_count; i++) free(choices[i]);
    free(choices);
    free(a.text);
    return err;
}

static em_status too_few_docs(const loader *ld, const doc *d, size_t wanted, const split *pool,
                              size_t have, const char *why) {
    em_mark at = {em_intern(d->source.data_file), d->source.line, 0};
    return em_error_at(EM_EXIT_BAD_INPUT, at,
                       "document %zu: %d-shot needs %zu few-shot documents%s, and split '%s' "
                       "has %zu",
                       d->source.doc_index, ld->task->num_fewshot, wanted, why, pool->name, have);
}

/* The few-shot documents of eval document d, as lm-eval's sampler draws them (its one Random
 * goes on from document to document). */
static em_status sample_fewshot(const loader *ld, em_mt19937 *rnd, const split *pool, const doc *d,
                                bool exclude, size_t n, size_t *picked) {
    size_t count = pool->count;
    if (ld->first_n) {
        size_t k = 0;
        for (size_t i = 0; i < count && k < n; i++)
            if (!exclude || !cJSON_Compare(pool->docs[i].json, d->json, true)) picked[k++] = i;
        if (k < n) return too_few_docs(ld, d, n, pool, k, "");
        return NULL;
    }
    bool remove = exclude && cJSON_GetArraySize(d->json) > 0; /* `if not eval_doc` */
    size_t draw = remove ? n + 1 : n;
    if (draw > count)
        return too_few_docs(ld, d, draw, pool, count,
                            remove ? " (lm-eval draws one more, to leave the document out)" : "");
    size_t *idx = em_xmalloc(draw * sizeof *idx);
    em_python_sample(rnd, count, draw, idx);
    size_t k = 0;
    for (size_t i = 0; i < draw && k < n; i++)
        if (!remove || !cJSON_Compare(pool->docs[idx[i]].json, d->json, true)) picked[k++] = idx[i];
    free(idx);
    if (k < n) {
        /* copies of the document were drawn: lm-eval draws again from the pool without them */
        size_t *rest = em_xmalloc(count * sizeof *rest), m = 0;
        for (size_t i = 0; i < count; i++)
            if (!cJSON_Compare(pool->docs[i].json, d->json, true)) rest[m++] = i;
        if (m < n) {
            free(rest);
            return too_few_docs(ld, d, n, pool, m, " besides copies of the document");
        }
        size_t *again = em_xmalloc(n * sizeof *again);
        em_python_sample(rnd, m, n, again);
        for (size_t i = 0; i < n; i++) picked[i] = rest[again[i]];
        free(again);
        free(rest);
    }
    return NULL;
}

static em_status build_example(const loader *ld, const doc *d, const split *pool, bool exclude,
                               em_mt19937 *rnd, em_task_example *ex) {
    em_task *t = ld->task;
    size_t len = 0;
    char *ctx = em_xstrdup("");
    em_status err = NULL;
    if (ld->description.tmpl && ld->description.text[0]) {
        char *desc;
        if ((err = value_text(ld, &ld->description, d, &desc))) goto done;
        append(&ctx, &len, desc);
        free(desc);
    }
    if (t->num_fewshot > 0) {
        size_t *picked = em_xmalloc((size_t)t->num_fewshot * sizeof *picked);
        err = sample_fewshot(ld, rnd, pool, d, exclude, (size_t)t->num_fewshot, picked);
        for (int i = 0; !err && i < t->num_fewshot; i++)
            err = fewshot_turn(ld, &pool->docs[picked[i]], &ctx, &len);
        free(picked);
        if (err) goto done;
    }
    char *q;
    if ((err = value_text(ld, &ld->text, d, &q))) goto done;
    append(&ctx, &len, q);
    free(q);

    target gold;
    if ((err = value_target(ld, &ld->target, d, &gold))) goto done;
    ex->doc_index = d->source.doc_index;
    if (t->output == EM_TASK_LOGLIKELIHOOD) {
        if (gold.kind != TARGET_TEXT) {
            err = doc_error(d, &ld->target, "a loglikelihood task's target must be a string");
            goto done;
        }
        ex->choices = em_xcalloc(1, sizeof *ex->choices);
        ex->continuations = em_xcalloc(1, sizeof *ex->continuations);
        ex->choices[0] = gold.text;
        ex->continuations[0] = em_xstrdup(gold.text);
        ex->choice_count = 1;
        ex->gold = 0;
    } else if (t->output == EM_TASK_GENERATE_UNTIL && !ld->has_choice) {
        /* process_results casts the target to the response's type: str */
        if (gold.kind == TARGET_NONE) {
            err = doc_error(d, &ld->target, "the target is null");
            goto done;
        }
        ex->choices = em_xcalloc(1, sizeof *ex->choices);
        ex->continuations = em_xcalloc(1, sizeof *ex->continuations);
        ex->choices[0] = gold.kind == TARGET_TEXT ? gold.text : em_xasprintf("%lld", gold.index);
        ex->continuations[0] = em_xstrdup(ex->choices[0]);
        ex->choice_count = 1;
        ex->gold = 0;
    } else {
        if ((err = value_choices(&ld->choice, d, &ex->choices, &ex->choice_count))) {
            free(gold.text);
            goto done;
        }
        ex->continuations = em_xcalloc(ex->choice_count + 1, sizeof *ex->continuations);
        if (!ex->choice_count) {
            free(gold.text);
            err = doc_error(d, &ld->choice, "there are no choices");
            goto done;
        }
        for (size_t i = 0; i < ex->choice_count; i++)
            ex->continuations[i] = em_xasprintf("%s%s", ld->target_delimiter, ex->choices[i]);
        ex->gold = -1;
        if (gold.kind == TARGET_INDEX && gold.index >= 0 &&
            gold.index < (long long)ex->choice_count) {
            ex->gold = (int)gold.index;
        } else if (gold.kind == TARGET_TEXT) {
            for (size_t i = 0; i < ex->choice_count && ex->gold < 0; i++)
                if (!strcmp(ex->choices[i], gold.text)) ex->gold = (int)i;
        }
        if (ex->gold < 0) {
            if (gold.kind == TARGET_INDEX)
                err = doc_error(d, &ld->target, "target %lld is out of range of the %zu choices",
                                gold.index, ex->choice_count);
            else if (gold.kind == TARGET_TEXT)
                err =
                    doc_error(d, &ld->target, "target \"%s\" is not one of the choices", gold.text);
            else
                err = doc_error(d, &ld->target, "the target is null");
        }
        free(gold.text);
        if (err) goto done;
        if (t->output == EM_TASK_GENERATE_UNTIL) { /* the target is choices[gold] */
            for (size_t i = 0; i < ex->choice_count; i++) {
                if ((int)i == ex->gold) continue;
                free(ex->choices[i]);
                free(ex->continuations[i]);
            }
            ex->choices[0] = ex->choices[ex->gold];
            free(ex->continuations[ex->gold]);
            ex->continuations[0] = em_xstrdup(ex->choices[0]);
            ex->choice_count = 1;
            ex->gold = 0;
        }
    }
    ex->doc_json = cJSON_PrintUnformatted(d->json);
done:
    if (err)
        free(ctx);
    else
        ex->context = ctx;
    return err;
}

static em_status build_examples(loader *ld, uint64_t seed, size_t limit) {
    em_task *t = ld->task;
    const char *eval_name = ld->test_split ? ld->test_split : ld->validation_split;
    if (!eval_name)
        return bad_at(ld->root->mark, "the task has neither test_split nor validation_split");
    split *eval, *pool = NULL;
    em_status err = load_split(ld, eval_name, &eval);
    if (err) return err;
    /* lm-eval's fewshot_docs: fewshot_split, else training, validation, then test docs */
    const char *pool_name = ld->fewshot_split      ? ld->fewshot_split
                            : ld->training_split   ? ld->training_split
                            : ld->validation_split ? ld->validation_split
                                                   : ld->test_split;
    if (t->num_fewshot > 0 && (err = load_split(ld, pool_name, &pool))) return err;
    if (t->num_fewshot > 0) {
        /* splits may have moved: load_split grows the array */
        for (size_t i = 0; i < ld->split_count; i++)
            if (!strcmp(ld->splits[i].name, eval_name)) eval = &ld->splits[i];
    }
    /* lm-eval leaves the document out of its own few-shot examples when fewshot_split equals
     * test_split (both unset counts as equal), whichever split the pool really is */
    bool exclude =
        (!ld->fewshot_split && !ld->test_split) ||
        (ld->fewshot_split && ld->test_split && !strcmp(ld->fewshot_split, ld->test_split));
    mark_float_columns(ld);
    size_t count = limit && limit < eval->count ? limit : eval->count;
    em_mt19937 rnd;
    em_mt19937_seed_python(&rnd, seed);
    t->examples = em_xcalloc(count, sizeof *t->examples);
    for (size_t i = 0; i < count; i++) {
        if ((err = build_example(ld, &eval->docs[i], pool, exclude, &rnd, &t->examples[i]))) {
            em_task_example_clear(&t->examples[i]);
            return err;
        }
        t->example_count++;
    }
    return NULL;
}

em_status em_lm_eval_task_load(const char *yaml_path, int num_fewshot, uint64_t fewshot_seed,
                               size_t limit, em_task **out) {
    *out = NULL;
    loader ld = {.yaml_path = yaml_path};
    char *text;
    size_t len;
    em_status err =
        em_read_regular_file(yaml_path, EM_RECIPE_MAX_BYTES, "a task YAML", &text, &len);
    if (err) return err;
    ld.yaml_text = text;
    ld.task = em_xcalloc(1, sizeof *ld.task);
    ld.task->format = EM_TASK_FORMAT_LM_EVAL;
    err = em_yaml_parse(text, len, yaml_path, &ld.root);
    if (!err) {
        char *tidy = em_path_beside(NULL, yaml_path);
        include_chain chain = {{tidy}, 0};
        err = merge_includes(&ld.root, &chain);
        free(tidy);
    }
    if (!err) err = read_config(&ld, num_fewshot);
    if (!err) err = build_examples(&ld, fewshot_seed, limit);
    doc_value *values[] = {&ld.text, &ld.target, &ld.choice, &ld.description};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) doc_value_clear(values[i]);
    for (size_t i = 0; i < ld.split_count; i++) {
        for (size_t j = 0; j < ld.splits[i].count; j++) cJSON_Delete(ld.splits[i].docs[j].json);
        free(ld.splits[i].docs);
        free(ld.splits[i].name);
    }
    free(ld.splits);
    em_node_free(ld.root);
    free(text);
    if (err) {
        em_task_free(ld.task);
        return err;
    }
    *out = ld.task;
    return NULL;
}
