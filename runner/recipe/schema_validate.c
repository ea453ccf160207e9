/* Checking a recipe tree against a JSON Schema (the subset listed in schema.h, plus `$ref`
 * within the schema). The first violation is reported with the node's file:line:col and the
 * option's dotted path ("option 'require.nccl' must be a string, got an integer 5"); absent
 * properties that have a `default` get it. For oneOf/anyOf the message comes from the branch
 * the value most likely meant: the one whose `const` discriminator (e.g. `kind`) matches, else
 * the one that got furthest. */
#include "runner/recipe/schema_tree.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Deeper than any recipe: it stops `$ref` loops that consume no input. */
enum { MAX_DEPTH = 256 };

typedef struct vctx {
    const em_schema *schema;
    const char *what; /* "stage 'wiki'", or NULL */
    int depth;
    /* keys of the top-level map that another schema checks (skipped here, offered as hints) */
    const char *const *shared;
    size_t shared_count;
} vctx;

/* ---- messages -------------------------------------------------------------------------- */

/* "<what>: option 'path' <predicate>", or "<what> <predicate>" for the node itself. */
static em_status fail_subject(const vctx *c, em_mark at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static em_status fail_subject(const vctx *c, em_mark at, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_status body = em_error_newv(EM_EXIT_BAD_INPUT, fmt, ap);
    va_end(ap);
    em_status err;
    if (path[0] && c->what)
        err =
            em_error_at(EM_EXIT_BAD_INPUT, at, "%s: option '%s' %s", c->what, path, body->message);
    else if (path[0])
        err = em_error_at(EM_EXIT_BAD_INPUT, at, "option '%s' %s", path, body->message);
    else
        err =
            em_error_at(EM_EXIT_BAD_INPUT, at, "%s %s", c->what ? c->what : "value", body->message);
    em_error_free(body);
    return err;
}

/* "<what>: <message>". */
static em_status fail_plain(const vctx *c, em_mark at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static em_status fail_plain(const vctx *c, em_mark at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_status body = em_error_newv(EM_EXIT_BAD_INPUT, fmt, ap);
    va_end(ap);
    em_status err = c->what ? em_error_at(EM_EXIT_BAD_INPUT, at, "%s: %s", c->what, body->message)
                            : em_error_at(EM_EXIT_BAD_INPUT, at, "%s", body->message);
    em_error_free(body);
    return err;
}

static char *format_number(double v) {
    if (v == floor(v) && fabs(v) < 1e15) return em_xasprintf("%.0f", v);
    char buf[64];
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (strtod(buf, NULL) == v) break;
    }
    return em_xstrdup(buf);
}

/* A JSON value as a message shows it: strings bare or in quotes, numbers as short as exact. */
static char *json_text(const cJSON *j, bool quote_strings) {
    if (cJSON_IsString(j)) return em_xasprintf(quote_strings ? "'%s'" : "%s", j->valuestring);
    if (cJSON_IsNumber(j)) return format_number(j->valuedouble);
    char *printed = cJSON_PrintUnformatted(j);
    char *s = em_xstrdup(printed ? printed : "?");
    cJSON_free(printed);
    return s;
}

/* A value as "got ..." shows it: 'text' for strings (long or multi-line ones cut), the text of
 * other scalars. */
static char *node_text(const em_node *n) {
    if (n->kind != EM_NODE_SCALAR) return em_xstrdup(em_node_type_name(n));
    if (em_node_scalar_type(n) == EM_SCALAR_STRING) {
        size_t len = strlen(n->text), line = strcspn(n->text, "\r\n");
        if (len > 60 || line < len)
            return em_xasprintf("'%.*s...'", (int)(line < 57 ? line : 57), n->text);
        return em_xasprintf("'%s'", n->text);
    }
    if (em_node_is_null(n)) return em_xstrdup("null");
    return em_xstrdup(n->text);
}

static char *child_path(const char *path, const char *key) {
    return path[0] ? em_xasprintf("%s.%s", path, key) : em_xstrdup(key);
}

/* ---- types and values ------------------------------------------------------------------ */

static bool type_matches(const char *type, const em_node *n) {
    if (!strcmp(type, "object")) return n->kind == EM_NODE_MAP;
    if (!strcmp(type, "array")) return n->kind == EM_NODE_SEQ;
    if (n->kind != EM_NODE_SCALAR) return false;
    em_scalar_type t = em_node_scalar_type(n);
    if (!strcmp(type, "string")) return t == EM_SCALAR_STRING;
    if (!strcmp(type, "integer")) return t == EM_SCALAR_INT;
    if (!strcmp(type, "number")) return t == EM_SCALAR_INT || t == EM_SCALAR_FLOAT;
    if (!strcmp(type, "boolean")) return t == EM_SCALAR_BOOL;
    return t == EM_SCALAR_NULL; /* "null" */
}

static const char *type_article(const char *type) {
    if (!strcmp(type, "object")) return "a map";
    if (!strcmp(type, "array")) return "a list";
    if (!strcmp(type, "string")) return "a string";
    if (!strcmp(type, "integer")) return "an integer";
    if (!strcmp(type, "number")) return "a number";
    if (!strcmp(type, "boolean")) return "a boolean";
    return "null";
}

/* Appends the article of each type name in `type` (a string or a list) to *words, once each,
 * joined by " or ". */
static void add_type_words(const cJSON *type, char **words) {
    for (const cJSON *t = cJSON_IsArray(type) ? type->child : type; t;
         t = cJSON_IsArray(type) ? t->next : NULL) {
        const char *word = type_article(t->valuestring);
        if (*words && strstr(*words, word)) continue;
        char *longer = *words ? em_xasprintf("%s or %s", *words, word) : em_xstrdup(word);
        free(*words);
        *words = longer;
    }
}

static bool any_type_matches(const cJSON *type, const em_node *n) {
    if (cJSON_IsString(type)) return type_matches(type->valuestring, n);
    for (const cJSON *t = type->child; t; t = t->next)
        if (type_matches(t->valuestring, n)) return true;
    return false;
}

static bool json_equals(const cJSON *j, const em_node *n) {
    if (cJSON_IsString(j))
        return n->kind == EM_NODE_SCALAR && em_node_scalar_type(n) == EM_SCALAR_STRING &&
               strcmp(n->text, j->valuestring) == 0;
    if (cJSON_IsNumber(j)) {
        double d;
        em_status err = em_node_as_double(n, &d);
        em_error_free(err);
        return !err && d == j->valuedouble;
    }
    if (cJSON_IsBool(j)) {
        bool b;
        em_status err = em_node_as_bool(n, &b);
        em_error_free(err);
        return !err && b == (bool)cJSON_IsTrue(j);
    }
    if (cJSON_IsNull(j)) return em_node_is_null(n);
    if (cJSON_IsArray(j)) {
        if (n->kind != EM_NODE_SEQ || (int)n->count != cJSON_GetArraySize(j)) return false;
        size_t i = 0;
        for (const cJSON *item = j->child; item; item = item->next, i++)
            if (!json_equals(item, n->items[i])) return false;
        return true;
    }
    if (n->kind != EM_NODE_MAP || (int)n->count != cJSON_GetArraySize(j)) return false;
    for (const cJSON *item = j->child; item; item = item->next) {
        const em_node *v = em_node_get(n, item->string);
        if (!v || !json_equals(item, v)) return false;
    }
    return true;
}

/* A schema `default` as a tree; every node gets the mark `at` (the map it was added to). */
static em_node *json_to_node(const cJSON *j, em_mark at) {
    if (cJSON_IsObject(j)) {
        em_node *map = em_node_new_map(at);
        for (const cJSON *item = j->child; item; item = item->next)
            em_node_map_set(map, item->string, at, json_to_node(item, at));
        return map;
    }
    if (cJSON_IsArray(j)) {
        em_node *seq = em_node_new_seq(at);
        for (const cJSON *item = j->child; item; item = item->next)
            em_node_seq_append(seq, json_to_node(item, at));
        return seq;
    }
    if (cJSON_IsString(j)) return em_node_new_scalar(j->valuestring, true, at);
    char *text = cJSON_IsNumber(j) ? format_number(j->valuedouble)
                                   : em_xstrdup(cJSON_IsTrue(j)    ? "true"
                                                : cJSON_IsFalse(j) ? "false"
                                                                   : "null");
    em_node *n = em_node_new_scalar(text, false, at);
    free(text);
    return n;
}

/* Follows `$ref`s until a schema that is not only a reference. */
static const cJSON *deref(const vctx *c, const cJSON *s) {
    for (int i = 0; i < MAX_DEPTH && cJSON_IsObject(s); i++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!ref || cJSON_GetObjectItemCaseSensitive(s, "default")) break;
        s = em_schema_resolve_ref(c->schema->root, ref->valuestring);
    }
    return s;
}

static const cJSON *keyword(const cJSON *s, const char *name) {
    return cJSON_IsObject(s) ? cJSON_GetObjectItemCaseSensitive(s, name) : NULL;
}

/* ---- validation ------------------------------------------------------------------------ */

static em_status validate(vctx *c, const cJSON *s, em_node *node, const char *path, int *progress);

static em_status out_of_range(const vctx *c, const em_node *node, const char *path,
                              const char *words, const cJSON *bound) {
    char *want = format_number(bound->valuedouble);
    em_status err =
        fail_subject(c, node->mark, path, "must be %s %s, got %s", words, want, node->text);
    free(want);
    return err;
}

static em_status check_number(const vctx *c, const cJSON *s, const em_node *node,
                              const char *path) {
    double v;
    em_status err = em_node_as_double(node, &v);
    if (err) {
        em_error_free(err); /* not a number: `type` speaks for it */
        return NULL;
    }
    /* written as !(v >= bound) so that .nan is out of every range */
    const cJSON *b;
    if ((b = keyword(s, "minimum")) && !(v >= b->valuedouble))
        return out_of_range(c, node, path, "at least", b);
    if ((b = keyword(s, "exclusiveMinimum")) && !(v > b->valuedouble))
        return out_of_range(c, node, path, "greater than", b);
    if ((b = keyword(s, "maximum")) && !(v <= b->valuedouble))
        return out_of_range(c, node, path, "at most", b);
    if ((b = keyword(s, "exclusiveMaximum")) && !(v < b->valuedouble))
        return out_of_range(c, node, path, "less than", b);
    return NULL;
}

static size_t utf8_length(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static em_status check_string(const vctx *c, const cJSON *s, const em_node *node,
                              const char *path) {
    if (node->kind != EM_NODE_SCALAR || em_node_scalar_type(node) != EM_SCALAR_STRING) return NULL;
    const cJSON *min = keyword(s, "minLength"), *max = keyword(s, "maxLength");
    size_t len = utf8_length(node->text);
    if (min && min->valuedouble == 1 && len == 0)
        return fail_subject(c, node->mark, path, "must not be empty");
    char *got = node_text(node);
    em_status err = NULL;
    if (min && len < (size_t)min->valuedouble)
        err = fail_subject(c, node->mark, path, "must be at least %.0f characters long, got %s",
                           min->valuedouble, got);
    else if (max && len > (size_t)max->valuedouble)
        err = fail_subject(c, node->mark, path, "must be at most %.0f characters long, got %s",
                           max->valuedouble, got);
    const cJSON *pattern = keyword(s, "pattern");
    regex_t re;
    if (!err && pattern && em_schema_compile_pattern(pattern->valuestring, &re) == 0) {
        /* (the pattern compiled when the schema was loaded) */
        bool match = regexec(&re, node->text, 0, NULL, 0) == 0;
        regfree(&re);
        if (!match)
            err = fail_subject(c, node->mark, path, "must match the pattern '%s', got %s",
                               pattern->valuestring, got);
    }
    free(got);
    return err;
}

static em_status check_enum(const vctx *c, const cJSON *values, const em_node *node,
                            const char *path) {
    for (const cJSON *v = values->child; v; v = v->next)
        if (json_equals(v, node)) return NULL;
    char *list = NULL;
    for (const cJSON *v = values->child; v; v = v->next) {
        char *text = json_text(v, false);
        char *longer = list ? em_xasprintf("%s, %s", list, text) : em_xstrdup(text);
        free(text);
        free(list);
        list = longer;
    }
    char *got = node_text(node);
    em_status err = fail_subject(c, node->mark, path, "must be one of %s, got %s", list, got);
    free(got);
    free(list);
    return err;
}

static bool is_shared(const vctx *c, const char *key) {
    for (size_t k = 0; k < c->shared_count; k++)
        if (strcmp(c->shared[k], key) == 0) return true;
    return false;
}

static em_status check_map(vctx *c, const cJSON *s, em_node *node, const char *path,
                           int *progress) {
    const cJSON *properties = keyword(s, "properties");
    const cJSON *additional = keyword(s, "additionalProperties");
    em_status err = NULL;
    bool top = path[0] == '\0';
    for (size_t i = 0; i < node->count && !err; i++) {
        em_map_entry *e = &node->entries[i];
        const cJSON *ps = properties ? cJSON_GetObjectItemCaseSensitive(properties, e->key) : NULL;
        if (!ps && top && is_shared(c, e->key)) continue;
        char *sub = child_path(path, e->key);
        if (ps) {
            err = validate(c, ps, e->value, sub, progress);
        } else if (cJSON_IsFalse(additional)) {
            const char *names[512];
            size_t n = 0;
            for (const cJSON *p = properties ? properties->child : NULL; p && n < 512; p = p->next)
                names[n++] = p->string;
            for (size_t k = 0; top && k < c->shared_count && n < 512; k++)
                names[n++] = c->shared[k];
            const char *close = em_did_you_mean(e->key, names, n);
            if (close) {
                char *hint = child_path(path, close);
                err = fail_plain(c, e->key_mark, "unknown option '%s' (did you mean '%s'?)", sub,
                                 hint);
                free(hint);
            } else {
                err = fail_plain(c, e->key_mark, "unknown option '%s'", sub);
            }
        } else if (cJSON_IsObject(additional)) {
            err = validate(c, additional, e->value, sub, progress);
        }
        free(sub);
        if (!err) (*progress)++;
    }
    const cJSON *required = keyword(s, "required");
    for (const cJSON *r = required ? required->child : NULL; r && !err; r = r->next) {
        if (em_node_get(node, r->valuestring)) continue;
        char *sub = child_path(path, r->valuestring);
        err = fail_plain(c, node->mark, "missing required option '%s'", sub);
        free(sub);
    }
    /* Defaults of absent properties, checked like written values (so theirs apply too). */
    for (const cJSON *p = properties ? properties->child : NULL; p && !err; p = p->next) {
        if (em_node_get(node, p->string)) continue;
        const cJSON *def = keyword(deref(c, p), "default");
        if (!def) continue;
        em_node *value = json_to_node(def, node->mark);
        em_node_map_set(node, p->string, node->mark, value);
        char *sub = child_path(path, p->string);
        err = validate(c, p, value, sub, progress);
        free(sub);
    }
    return err;
}

static em_status check_seq(vctx *c, const cJSON *s, em_node *node, const char *path,
                           int *progress) {
    const cJSON *min = keyword(s, "minItems"), *max = keyword(s, "maxItems");
    if (min && node->count < (size_t)min->valuedouble)
        return fail_subject(c, node->mark, path, "must have at least %.0f item%s, got %zu",
                            min->valuedouble, min->valuedouble == 1 ? "" : "s", node->count);
    if (max && node->count > (size_t)max->valuedouble)
        return fail_subject(c, node->mark, path, "must have at most %.0f item%s, got %zu",
                            max->valuedouble, max->valuedouble == 1 ? "" : "s", node->count);
    const cJSON *items = keyword(s, "items");
    em_status err = NULL;
    for (size_t i = 0; items && i < node->count && !err; i++) {
        char *sub = em_xasprintf("%s[%zu]", path, i);
        err = validate(c, items, node->items[i], sub, progress);
        free(sub);
    }
    return err;
}

/* How a oneOf/anyOf branch's `const` properties (its discriminator, e.g. kind) fit a map. */
enum { DISCRIMINATOR_MISMATCH = 0, NO_DISCRIMINATOR = 1, DISCRIMINATOR_MATCH = 2 };

static int discriminator_fit(const vctx *c, const cJSON *branch, const em_node *node) {
    const cJSON *properties = keyword(deref(c, branch), "properties");
    if (!properties || node->kind != EM_NODE_MAP) return NO_DISCRIMINATOR;
    bool has_const = false;
    for (const cJSON *p = properties->child; p; p = p->next) {
        const cJSON *value = keyword(deref(c, p), "const");
        if (!value) continue;
        has_const = true;
        const em_node *v = em_node_get(node, p->string);
        if (!v || !json_equals(value, v)) return DISCRIMINATOR_MISMATCH;
    }
    return has_const ? DISCRIMINATOR_MATCH : NO_DISCRIMINATOR;
}

/* The name of the first `const` property of a branch, or NULL. */
static const char *discriminator_name(const vctx *c, const cJSON *branch) {
    const cJSON *properties = keyword(deref(c, branch), "properties");
    for (const cJSON *p = properties ? properties->child : NULL; p; p = p->next)
        if (keyword(deref(c, p), "const")) return p->string;
    return NULL;
}

/* When no branch's discriminator fits and they all use the same one, the message is about it:
 * "option 'kind' must be one of a, b, got 'c'". NULL when that does not apply. */
static em_status discriminator_error(const vctx *c, const cJSON *branches, const em_node *node,
                                     const char *path) {
    const char *name = discriminator_name(c, branches->child);
    if (!name || node->kind != EM_NODE_MAP) return NULL;
    cJSON *values = cJSON_CreateArray();
    for (const cJSON *b = branches->child; b; b = b->next) {
        const char *other = discriminator_name(c, b);
        if (!other || strcmp(other, name) != 0) {
            cJSON_Delete(values);
            return NULL;
        }
        const cJSON *props = keyword(deref(c, b), "properties");
        const cJSON *value =
            keyword(deref(c, cJSON_GetObjectItemCaseSensitive(props, name)), "const");
        cJSON_AddItemToArray(values, cJSON_Duplicate(value, true));
    }
    char *sub = child_path(path, name);
    const em_node *v = em_node_get(node, name);
    em_status err = v ? check_enum(c, values, v, sub)
                      : fail_plain(c, node->mark, "missing required option '%s'", sub);
    free(sub);
    cJSON_Delete(values);
    return err;
}

/* oneOf (exactly one branch must match) and anyOf (at least one). Each branch is tried on a copy,
 * so only the matching branch's defaults end up in the node. */
static em_status check_alternatives(vctx *c, const cJSON *branches, bool one_of, em_node *node,
                                    const char *path, int *progress) {
    em_node *match = NULL;
    size_t match_index = 0, index = 0;
    em_status best = NULL;
    int best_fit = -1, best_progress = -1;
    bool all_wrong_type = true;
    char *type_words = NULL;
    for (const cJSON *b = branches->child; b; b = b->next, index++) {
        em_node *copy = em_node_clone(node);
        int branch_progress = 0;
        em_status err = validate(c, b, copy, path, &branch_progress);
        if (!err && match) {
            em_node_free(copy);
            em_node_free(match);
            em_error_free(best);
            free(type_words);
            return fail_subject(c, node->mark, path,
                                "matches more than one of its alternatives (%zu and %zu of oneOf)",
                                match_index + 1, index + 1);
        }
        if (!err) {
            match = copy;
            match_index = index;
            if (!one_of) break;
            continue;
        }
        em_node_free(copy);
        const cJSON *type = keyword(deref(c, b), "type");
        if (type && !any_type_matches(type, node))
            add_type_words(type, &type_words);
        else
            all_wrong_type = false;
        int fit = discriminator_fit(c, b, node);
        if (!best || fit > best_fit || (fit == best_fit && branch_progress > best_progress)) {
            em_error_free(best);
            best = err;
            best_fit = fit;
            best_progress = branch_progress;
        } else {
            em_error_free(err);
        }
    }
    if (match) {
        /* take the checked copy (with its defaults) in place of the node */
        em_node tmp = *node;
        *node = *match;
        *match = tmp;
        em_node_free(match);
        em_error_free(best);
        free(type_words);
        (*progress)++;
        return NULL;
    }
    em_status err = NULL;
    if (all_wrong_type) {
        char *found = em_node_describe(node);
        err = fail_subject(c, node->mark, path, "must be %s, got %s", type_words, found);
        free(found);
    } else if (best_fit == DISCRIMINATOR_MISMATCH) {
        err = discriminator_error(c, branches, node, path);
    }
    free(type_words);
    if (err) {
        em_error_free(best);
        return err;
    }
    *progress += best_progress;
    return best;
}

static em_status check_type(const vctx *c, const cJSON *type, const em_node *node,
                            const char *path) {
    if (!any_type_matches(type, node)) {
        char *words = NULL, *found = em_node_describe(node);
        add_type_words(type, &words);
        em_status err = fail_subject(c, node->mark, path, "must be %s, got %s", words, found);
        free(words);
        free(found);
        return err;
    }
    int64_t i;
    em_status err = NULL;
    if (em_node_scalar_type(node) == EM_SCALAR_INT && node->kind == EM_NODE_SCALAR &&
        (err = em_node_as_int(node, &i)) != NULL) {
        em_error_free(err);
        return fail_subject(c, node->mark, path, "must fit in 64 bits, got %s", node->text);
    }
    return NULL;
}

static em_status validate_keywords(vctx *c, const cJSON *s, em_node *node, const char *path,
                                   int *progress) {
    em_status err;
    const cJSON *k;
    if ((k = keyword(s, "$ref")) &&
        (err = validate(c, em_schema_resolve_ref(c->schema->root, k->valuestring), node, path,
                        progress)))
        return err;
    if ((k = keyword(s, "type"))) {
        if ((err = check_type(c, k, node, path))) return err;
        (*progress)++;
    }
    if ((k = keyword(s, "const")) && !json_equals(k, node)) {
        char *want = json_text(k, true), *got = node_text(node);
        err = fail_subject(c, node->mark, path, "must be %s, got %s", want, got);
        free(want);
        free(got);
        return err;
    }
    if ((k = keyword(s, "enum")) && (err = check_enum(c, k, node, path))) return err;
    if ((err = check_number(c, s, node, path))) return err;
    if ((err = check_string(c, s, node, path))) return err;
    (*progress)++;
    if (node->kind == EM_NODE_MAP && (err = check_map(c, s, node, path, progress))) return err;
    if (node->kind == EM_NODE_SEQ && (err = check_seq(c, s, node, path, progress))) return err;
    if ((k = keyword(s, "oneOf")) && (err = check_alternatives(c, k, true, node, path, progress)))
        return err;
    if ((k = keyword(s, "anyOf")) && (err = check_alternatives(c, k, false, node, path, progress)))
        return err;
    return NULL;
}

static em_status validate(vctx *c, const cJSON *s, em_node *node, const char *path, int *progress) {
    if (cJSON_IsBool(s))
        return cJSON_IsTrue(s) ? NULL : fail_subject(c, node->mark, path, "is not allowed here");
    if (c->depth >= MAX_DEPTH)
        return fail_subject(c, node->mark, path, "is nested too deeply to check (schema %s)",
                            c->schema->name);
    c->depth++;
    em_status err = validate_keywords(c, s, node, path, progress);
    c->depth--;
    return err;
}

em_status em_schema_validate_shared(const em_schema *schema, em_node *node, const char *what,
                                    const char *const *shared, size_t shared_count) {
    vctx c = {schema, what && what[0] ? what : NULL, 0, shared, shared_count};
    int progress = 0;
    return validate(&c, schema->root, node, "", &progress);
}

em_status em_schema_validate(const em_schema *schema, em_node *node, const char *what) {
    return em_schema_validate_shared(schema, node, what, NULL, 0);
}
