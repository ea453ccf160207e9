/* Loading a JSON Schema: parsing it with cJSON and checking, once, that it only uses what the
 * validator implements (an unknown keyword or a dangling $ref is a bug in the schema, reported
 * with its JSON pointer). Validation itself is in schema_validate.c. */
#include "runner/recipe/schema_tree.h"

#include <stdlib.h>
#include <string.h>

#include "runner/recipe/embedded.h"

/* Keywords that only document (editors show them); the validator ignores them. */
static const char *const annotation_keywords[] = {
    "$schema",  "$id",        "$comment", "title", "description", "markdownDescription",
    "examples", "deprecated", "default",
};

static const char *const type_names[] = {"object", "array",   "string", "integer",
                                         "number", "boolean", "null"};

static bool in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

const cJSON *em_schema_resolve_ref(const cJSON *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const cJSON *cur = root;
    const char *p = ref + 1;
    while (*p == '/' && cur) {
        p++;
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        /* unescape ~1 -> '/', ~0 -> '~' */
        char *key = em_xmalloc(n + 1);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1'))
                key[k++] = p[++i] == '0' ? '~' : '/';
            else
                key[k++] = p[i];
        }
        key[k] = '\0';
        cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, key) : NULL;
        free(key);
        p += n;
    }
    return *p ? NULL : cur;
}

int em_schema_compile_pattern(const char *pattern, regex_t *re) {
    /* Each escape becomes at most 15 characters. */
    char *posix = em_xmalloc(strlen(pattern) * 16 + 1);
    char *out = posix;
    bool in_class = false;
    for (const char *p = pattern; *p; p++) {
        if (*p == '\\' && p[1]) {
            char c = *++p;
            const char *class_body = c == 'd'   ? "0-9"
                                     : c == 'w' ? "A-Za-z0-9_"
                                     : c == 's' ? " \t\n\r\f\v"
                                                : NULL;
            if (class_body) {
                out += sprintf(out, in_class ? "%s" : "[%s]", class_body);
            } else if (in_class) {
                *out++ = c; /* inside [...] POSIX takes a backslash literally */
            } else {
                *out++ = '\\';
                *out++ = c;
            }
            continue;
        }
        if (*p == '[' && !in_class) {
            in_class = true;
            *out++ = *p;
            if (p[1] == '^') *out++ = *++p;
            if (p[1] == ']') *out++ = *++p; /* a leading ']' is a literal */
            continue;
        }
        if (*p == ']' && in_class) in_class = false;
        *out++ = *p;
    }
    *out = '\0';
    int rc = regcomp(re, posix, REG_EXTENDED | REG_NOSUB);
    free(posix);
    return rc;
}

static em_status schema_error(const em_schema *s, const char *pointer, const char *fmt,
                              const char *detail) {
    char *msg = em_xasprintf(fmt, detail);
    em_status err = em_error_new(EM_EXIT_FAILURE, "schema %s, at '#%s': %s", s->name, pointer, msg);
    free(msg);
    return err;
}

static em_status check_schema(const em_schema *s, const cJSON *node, const char *pointer);

/* Checks every schema in an object of schemas (properties, $defs) or an array (oneOf). */
static em_status check_children(const em_schema *s, const cJSON *container, const char *pointer) {
    em_status err = NULL;
    size_t i = 0;
    for (const cJSON *c = container->child; c && !err; c = c->next, i++) {
        char *sub = c->string ? em_xasprintf("%s/%s", pointer, c->string)
                              : em_xasprintf("%s/%zu", pointer, i);
        err = check_schema(s, c, sub);
        free(sub);
    }
    return err;
}

/* Checks the schemas a keyword holds; pointer ends with the keyword. */
static em_status check_subschemas(const em_schema *s, const cJSON *kw, const char *pointer) {
    const char *k = kw->string;
    if (!strcmp(k, "$defs") || !strcmp(k, "properties")) {
        if (!cJSON_IsObject(kw)) return schema_error(s, pointer, "'%s' must be an object", k);
        return check_children(s, kw, pointer);
    }
    if (!strcmp(k, "oneOf") || !strcmp(k, "anyOf")) {
        if (!cJSON_IsArray(kw) || cJSON_GetArraySize(kw) == 0)
            return schema_error(s, pointer, "'%s' must be a non-empty list of schemas", k);
        return check_children(s, kw, pointer);
    }
    return check_schema(s, kw, pointer); /* items, additionalProperties (may be true/false) */
}

static bool is_nonneg_int(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 &&
           v->valuedouble == (double)(long long)v->valuedouble;
}

static em_status check_keyword(const em_schema *s, const cJSON *kw, const char *pointer) {
    const char *k = kw->string;
    /* the keywords that hold schemas: check those, with their JSON pointer */
    if (!strcmp(k, "$defs") || !strcmp(k, "properties") || !strcmp(k, "items") ||
        !strcmp(k, "additionalProperties") || !strcmp(k, "oneOf") || !strcmp(k, "anyOf")) {
        char *sub = em_xasprintf("%s/%s", pointer, k);
        em_status err = check_subschemas(s, kw, sub);
        free(sub);
        return err;
    }
    if (in_list(k, annotation_keywords, sizeof annotation_keywords / sizeof *annotation_keywords))
        return NULL;
    if (!strcmp(k, "type")) {
        if (cJSON_IsString(kw)) {
            if (!in_list(kw->valuestring, type_names, 7))
                return schema_error(s, pointer, "unknown type '%s'", kw->valuestring);
            return NULL;
        }
        if (!cJSON_IsArray(kw) || cJSON_GetArraySize(kw) == 0)
            return schema_error(s, pointer, "'%s' must be a type name or a list of them", k);
        for (const cJSON *t = kw->child; t; t = t->next)
            if (!cJSON_IsString(t) || !in_list(t->valuestring, type_names, 7))
                return schema_error(s, pointer, "'%s' lists an unknown type", k);
        return NULL;
    }
    if (!strcmp(k, "required")) {
        if (!cJSON_IsArray(kw)) return schema_error(s, pointer, "'%s' must be a list of names", k);
        for (const cJSON *r = kw->child; r; r = r->next)
            if (!cJSON_IsString(r))
                return schema_error(s, pointer, "'%s' must be a list of names", k);
        return NULL;
    }
    if (!strcmp(k, "enum")) {
        if (!cJSON_IsArray(kw) || cJSON_GetArraySize(kw) == 0)
            return schema_error(s, pointer, "'%s' must be a non-empty list", k);
        return NULL;
    }
    if (!strcmp(k, "const")) return NULL;
    if (!strcmp(k, "minimum") || !strcmp(k, "maximum") || !strcmp(k, "exclusiveMinimum") ||
        !strcmp(k, "exclusiveMaximum")) {
        if (!cJSON_IsNumber(kw)) return schema_error(s, pointer, "'%s' must be a number", k);
        return NULL;
    }
    if (!strcmp(k, "minLength") || !strcmp(k, "maxLength") || !strcmp(k, "minItems") ||
        !strcmp(k, "maxItems")) {
        if (!is_nonneg_int(kw))
            return schema_error(s, pointer, "'%s' must be a non-negative integer", k);
        return NULL;
    }
    if (!strcmp(k, "pattern")) {
        regex_t re;
        if (!cJSON_IsString(kw) || em_schema_compile_pattern(kw->valuestring, &re) != 0)
            return schema_error(s, pointer, "'%s' is not a valid regular expression", k);
        regfree(&re);
        return NULL;
    }
    if (!strcmp(k, "$ref")) {
        if (!cJSON_IsString(kw) || !em_schema_resolve_ref(s->root, kw->valuestring))
            return schema_error(s, pointer, "'$ref' %s does not name a schema in this file",
                                cJSON_IsString(kw) ? kw->valuestring : "");
        return NULL;
    }
    return schema_error(s, pointer, "the validator does not support the keyword '%s'", k);
}

static em_status check_schema(const em_schema *s, const cJSON *node, const char *pointer) {
    if (cJSON_IsBool(node)) return NULL;
    if (!cJSON_IsObject(node)) return schema_error(s, pointer, "%s", "a schema must be an object");
    em_status err = NULL;
    for (const cJSON *kw = node->child; kw && !err; kw = kw->next)
        err = check_keyword(s, kw, pointer);
    return err;
}

/* The line and column of a byte offset, for JSON syntax errors. */
static void line_col(const char *text, size_t offset, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < offset && text[i]; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

em_status em_schema_parse(const char *json_text, const char *name, em_schema **out) {
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json_text, &end, true);
    if (!root) {
        int line, col;
        line_col(json_text, end ? (size_t)(end - json_text) : 0, &line, &col);
        return em_error_new(EM_EXIT_FAILURE, "schema %s:%d:%d: invalid JSON", name, line, col);
    }
    em_schema *s = em_xcalloc(1, sizeof *s);
    s->root = root;
    s->name = em_xstrdup(name);
    em_status err = check_schema(s, root, "");
    if (err) {
        em_schema_free(s);
        return err;
    }
    *out = s;
    return NULL;
}

em_status em_schema_load_embedded(const char *path, em_schema **out) {
    *out = NULL;
    const char *text = em_embedded_find(path);
    if (!text)
        return em_error_new(EM_EXIT_FAILURE, "no schema '%s' is built into evalmesh (schemas/%s)",
                            path, path);
    return em_schema_parse(text, path, out);
}

size_t em_schema_property_names(const em_schema *schema, const char *pointer, const char **names,
                                size_t max) {
    const cJSON *object = em_schema_resolve_ref(schema->root, pointer);
    const cJSON *properties =
        object ? cJSON_GetObjectItemCaseSensitive(object, "properties") : NULL;
    size_t n = 0;
    for (const cJSON *p = properties ? properties->child : NULL; p; p = p->next, n++)
        if (n < max) names[n] = p->string;
    return n;
}

bool em_schema_default_number(const em_schema *schema, const char *pointer, double *out) {
    const cJSON *property = em_schema_resolve_ref(schema->root, pointer);
    const cJSON *def = property ? cJSON_GetObjectItemCaseSensitive(property, "default") : NULL;
    if (!cJSON_IsNumber(def)) return false;
    *out = def->valuedouble;
    return true;
}

void em_schema_free(em_schema *schema) {
    if (!schema) return;
    cJSON_Delete(schema->root);
    free(schema->name);
    free(schema);
}
