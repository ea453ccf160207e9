/* The recipe tree (see node.h): construction, lookup, YAML 1.2 core-schema typing of scalars,
 * typed getters whose errors point at the node, and writing a tree back as YAML or JSON. */
#include "runner/recipe/node.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/paths.h"

/* ---- construction ---------------------------------------------------------------------- */

static em_node *node_new(em_node_kind kind, em_mark mark) {
    em_node *n = em_xcalloc(1, sizeof *n);
    n->kind = kind;
    n->mark = mark;
    return n;
}

em_node *em_node_new_scalar(const char *text, bool quoted, em_mark mark) {
    em_node *n = node_new(EM_NODE_SCALAR, mark);
    n->text = em_xstrdup(text ? text : "");
    n->quoted = quoted;
    return n;
}

em_node *em_node_new_map(em_mark mark) {
    return node_new(EM_NODE_MAP, mark);
}

em_node *em_node_new_seq(em_mark mark) {
    return node_new(EM_NODE_SEQ, mark);
}

static em_map_entry *find_entry(const em_node *map, const char *key) {
    if (!map || map->kind != EM_NODE_MAP) return NULL;
    for (size_t i = 0; i < map->count; i++)
        if (strcmp(map->entries[i].key, key) == 0) return &map->entries[i];
    return NULL;
}

void em_node_map_set(em_node *map, const char *key, em_mark key_mark, em_node *value) {
    em_map_entry *e = find_entry(map, key);
    if (e) {
        em_node_free(e->value);
        e->value = value;
        e->key_mark = key_mark;
        return;
    }
    map->entries = em_xrealloc(map->entries, (map->count + 1) * sizeof *map->entries);
    map->entries[map->count++] = (em_map_entry){em_xstrdup(key), key_mark, value};
}

bool em_node_map_remove(em_node *map, const char *key) {
    em_map_entry *e = find_entry(map, key);
    if (!e) return false;
    free(e->key);
    em_node_free(e->value);
    size_t i = (size_t)(e - map->entries);
    memmove(&map->entries[i], &map->entries[i + 1], (map->count - i - 1) * sizeof *e);
    map->count--;
    return true;
}

void em_node_seq_append(em_node *seq, em_node *item) {
    seq->items = em_xrealloc(seq->items, (seq->count + 1) * sizeof *seq->items);
    seq->items[seq->count++] = item;
}

em_node *em_node_clone(const em_node *node) {
    if (!node) return NULL;
    em_node *c = node_new(node->kind, node->mark);
    switch (node->kind) {
    case EM_NODE_SCALAR:
        c->text = em_xstrdup(node->text);
        c->quoted = node->quoted;
        break;
    case EM_NODE_MAP:
        c->entries = em_xcalloc(node->count, sizeof *c->entries);
        for (size_t i = 0; i < node->count; i++) {
            c->entries[i].key = em_xstrdup(node->entries[i].key);
            c->entries[i].key_mark = node->entries[i].key_mark;
            c->entries[i].value = em_node_clone(node->entries[i].value);
        }
        c->count = node->count;
        break;
    case EM_NODE_SEQ:
        c->items = em_xcalloc(node->count, sizeof *c->items);
        for (size_t i = 0; i < node->count; i++) c->items[i] = em_node_clone(node->items[i]);
        c->count = node->count;
        break;
    }
    return c;
}

void em_node_free(em_node *node) {
    if (!node) return;
    free(node->text);
    for (size_t i = 0; node->kind == EM_NODE_MAP && i < node->count; i++) {
        free(node->entries[i].key);
        em_node_free(node->entries[i].value);
    }
    for (size_t i = 0; node->kind == EM_NODE_SEQ && i < node->count; i++)
        em_node_free(node->items[i]);
    free(node->entries);
    free(node->items);
    free(node);
}

/* ---- lookup ---------------------------------------------------------------------------- */

em_node *em_node_get(const em_node *map, const char *key) {
    em_map_entry *e = find_entry(map, key);
    return e ? e->value : NULL;
}

const em_map_entry *em_node_get_entry(const em_node *map, const char *key) {
    return find_entry(map, key);
}

em_node *em_node_get_path(const em_node *root, const char *dotted_path) {
    char *path = em_xstrdup(dotted_path);
    const em_node *cur = root;
    for (char *save = NULL, *seg = strtok_r(path, ".", &save); seg && cur;
         seg = strtok_r(NULL, ".", &save))
        cur = em_node_get(cur, seg);
    free(path);
    return (em_node *)cur;
}

/* ---- scalar typing (YAML 1.2 core schema) ---------------------------------------------- */

static bool all_chars(const char *s, const char *allowed) {
    if (!*s) return false;
    for (; *s; s++)
        if (!strchr(allowed, *s)) return false;
    return true;
}

static bool is_core_int(const char *s) {
    if (s[0] == '0' && s[1] == 'x') return all_chars(s + 2, "0123456789abcdefABCDEF");
    if (s[0] == '0' && s[1] == 'o') return all_chars(s + 2, "01234567");
    if (*s == '-' || *s == '+') s++;
    return all_chars(s, "0123456789");
}

/* [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?  or  [-+]?.inf  or  .nan */
static bool is_core_float(const char *s) {
    if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) return true;
    if (*s == '-' || *s == '+') s++;
    if (!strcmp(s, ".inf") || !strcmp(s, ".Inf") || !strcmp(s, ".INF")) return true;
    size_t digits = 0;
    for (; isdigit((unsigned char)*s); s++) digits++;
    if (*s == '.') {
        s++;
        size_t frac = 0;
        for (; isdigit((unsigned char)*s); s++) frac++;
        if (digits == 0 && frac == 0) return false;
    } else if (digits == 0) {
        return false;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+') s++;
        if (!isdigit((unsigned char)*s)) return false;
        while (isdigit((unsigned char)*s)) s++;
    }
    return *s == '\0';
}

static em_scalar_type plain_type(const char *s) {
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
        return EM_SCALAR_NULL;
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE") || !strcmp(s, "false") ||
        !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return EM_SCALAR_BOOL;
    if (is_core_int(s)) return EM_SCALAR_INT;
    if (is_core_float(s)) return EM_SCALAR_FLOAT;
    return EM_SCALAR_STRING;
}

em_scalar_type em_node_scalar_type(const em_node *node) {
    if (!node || node->kind != EM_NODE_SCALAR) return EM_SCALAR_STRING;
    return node->quoted ? EM_SCALAR_STRING : plain_type(node->text);
}

bool em_node_is_null(const em_node *node) {
    return !node || (node->kind == EM_NODE_SCALAR && em_node_scalar_type(node) == EM_SCALAR_NULL);
}

const char *em_node_type_name(const em_node *node) {
    if (!node) return "nothing";
    if (node->kind == EM_NODE_MAP) return "a map";
    if (node->kind == EM_NODE_SEQ) return "a list";
    switch (em_node_scalar_type(node)) {
    case EM_SCALAR_NULL:
        return "null";
    case EM_SCALAR_BOOL:
        return "a boolean";
    case EM_SCALAR_INT:
        return "an integer";
    case EM_SCALAR_FLOAT:
        return "a number";
    case EM_SCALAR_STRING:
        return "a string";
    }
    return "a value";
}

char *em_node_describe(const em_node *node) {
    const char *type = em_node_type_name(node);
    if (!node || node->kind != EM_NODE_SCALAR || em_node_scalar_type(node) == EM_SCALAR_NULL)
        return em_xstrdup(type);
    const char *text = node->text;
    size_t n = strlen(text);
    if (em_node_scalar_type(node) != EM_SCALAR_STRING) return em_xasprintf("%s %s", type, text);
    /* Long or multi-line strings are cut so one message stays one line. */
    size_t line = strcspn(text, "\r\n");
    if (n > 60 || line < n)
        return em_xasprintf("%s \"%.*s...\"", type, (int)(line < 57 ? line : 57), text);
    return em_xasprintf("%s \"%s\"", type, text);
}

/* ---- typed getters --------------------------------------------------------------------- */

static em_status wrong_type(const em_node *node, const char *expected) {
    char *found = em_node_describe(node);
    em_status err =
        node ? em_error_at(EM_EXIT_BAD_INPUT, node->mark, "expected %s, found %s", expected, found)
             : em_error_new(EM_EXIT_BAD_INPUT, "expected %s, found nothing", expected);
    free(found);
    return err;
}

em_status em_node_as_bool(const em_node *node, bool *out) {
    if (!node || node->kind != EM_NODE_SCALAR || em_node_scalar_type(node) != EM_SCALAR_BOOL)
        return wrong_type(node, "a boolean");
    *out = node->text[0] == 't' || node->text[0] == 'T';
    return NULL;
}

/* The value of a core-schema integer's text; false when it does not fit in int64. */
static bool parse_int(const char *s, int64_t *out) {
    errno = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
        unsigned long long u = strtoull(s + 2, NULL, s[1] == 'x' ? 16 : 8);
        if (errno || u > INT64_MAX) return false;
        *out = (int64_t)u;
        return true;
    }
    long long v = strtoll(s, NULL, 10);
    if (errno) return false;
    *out = v;
    return true;
}

em_status em_node_as_int(const em_node *node, int64_t *out) {
    if (!node || node->kind != EM_NODE_SCALAR || em_node_scalar_type(node) != EM_SCALAR_INT)
        return wrong_type(node, "an integer");
    if (!parse_int(node->text, out))
        return em_error_at(EM_EXIT_BAD_INPUT, node->mark,
                           "integer %s is out of range (at most 64 bits)", node->text);
    return NULL;
}

static double parse_float(const char *s) {
    const char *p = s + (*s == '-' || *s == '+');
    if (p[0] == '.' && (p[1] == 'n' || p[1] == 'N')) return NAN;
    if (p[0] == '.' && (p[1] == 'i' || p[1] == 'I')) return *s == '-' ? -INFINITY : INFINITY;
    return strtod(s, NULL);
}

em_status em_node_as_double(const em_node *node, double *out) {
    em_scalar_type t = em_node_scalar_type(node);
    if (!node || node->kind != EM_NODE_SCALAR || (t != EM_SCALAR_INT && t != EM_SCALAR_FLOAT))
        return wrong_type(node, "a number");
    if (t == EM_SCALAR_FLOAT) {
        *out = parse_float(node->text);
        return NULL;
    }
    int64_t v;
    /* Integers beyond 64 bits are still numbers: read them as a double. */
    *out = parse_int(node->text, &v) ? (double)v : strtod(node->text, NULL);
    return NULL;
}

em_status em_node_as_string(const em_node *node, const char **out) {
    if (!node || node->kind != EM_NODE_SCALAR || em_node_is_null(node))
        return wrong_type(node, "a string");
    *out = node->text;
    return NULL;
}

bool em_node_get_bool(const em_node *map, const char *key, bool fallback) {
    bool v = fallback;
    em_status err = em_node_as_bool(em_node_get(map, key), &v);
    em_error_free(err);
    return err ? fallback : v;
}

int64_t em_node_get_int(const em_node *map, const char *key, int64_t fallback) {
    int64_t v = fallback;
    em_status err = em_node_as_int(em_node_get(map, key), &v);
    em_error_free(err);
    return err ? fallback : v;
}

double em_node_get_double(const em_node *map, const char *key, double fallback) {
    double v = fallback;
    em_status err = em_node_as_double(em_node_get(map, key), &v);
    em_error_free(err);
    return err ? fallback : v;
}

const char *em_node_get_string(const em_node *map, const char *key, const char *fallback) {
    const char *v = fallback;
    em_status err = em_node_as_string(em_node_get(map, key), &v);
    em_error_free(err);
    return err ? fallback : v;
}

/* A validated option that is absent or mistyped: the schema lacks its default (a bug). */
static void missing_option(const char *key, em_status err) {
    fprintf(stderr, "evalmesh: bug: option '%s' has no value after validation (%s)\n", key,
            err->message);
    em_error_free(err);
    exit(EM_EXIT_FAILURE);
}

bool em_node_option_bool(const em_node *map, const char *key) {
    bool v = false;
    em_status err = em_node_as_bool(em_node_get(map, key), &v);
    if (err) missing_option(key, err);
    return v;
}

int64_t em_node_option_int(const em_node *map, const char *key) {
    int64_t v = 0;
    em_status err = em_node_as_int(em_node_get(map, key), &v);
    if (err) missing_option(key, err);
    return v;
}

double em_node_option_double(const em_node *map, const char *key) {
    double v = 0;
    em_status err = em_node_as_double(em_node_get(map, key), &v);
    if (err) missing_option(key, err);
    return v;
}

const char *em_node_option_string(const em_node *map, const char *key) {
    const char *v = NULL;
    em_status err = em_node_as_string(em_node_get(map, key), &v);
    if (err) missing_option(key, err);
    return v;
}

char *em_node_path(const em_node *node) {
    return em_path_beside(node->mark.file, node->text);
}

/* ---- writing YAML ---------------------------------------------------------------------- */

/* The length in bytes of a character at p that YAML cannot show as itself (control characters,
 * C1 controls such as NEL, the line and paragraph separators, BOM and non-characters), setting
 * *code to its code point; 0 for any other character. */
static int unprintable_at(const unsigned char *p, unsigned *code) {
    int len = 0;
    if (p[0] < 0x20 || p[0] == 0x7f) {
        *code = p[0];
        len = 1;
    } else if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) {
        *code = p[1]; /* U+0080..U+009F */
        len = 2;
    } else if (p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9)) {
        *code = 0x2000u + (p[2] - 0x80u); /* U+2028, U+2029 */
        len = 3;
    } else if (p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
        *code = 0xFEFF;
        len = 3;
    } else if (p[0] == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF)) {
        *code = 0xFFFEu + (p[2] - 0xBEu); /* U+FFFE, U+FFFF */
        len = 3;
    }
    return len;
}

/* Whether a string must be quoted to load back as the same string. Besides what the core schema
 * would retype, strings that YAML 1.1 readers (PyYAML) take for booleans or numbers are quoted. */
static bool needs_quotes(const char *s) {
    if (!*s || plain_type(s) != EM_SCALAR_STRING) return true;
    static const char *const yaml11_words[] = {"y",  "Y",  "n",  "N",  "yes", "Yes", "YES", "no",
                                               "No", "NO", "on", "On", "ON",  "off", "Off", "OFF"};
    for (size_t i = 0; i < sizeof yaml11_words / sizeof *yaml11_words; i++)
        if (!strcmp(s, yaml11_words[i])) return true;
    if (strchr("-?:,[]{}#&*!|>'\"%@`+.<=0123456789 ", s[0])) return true;
    size_t n = strlen(s);
    if (s[n - 1] == ' ' || s[n - 1] == ':') return true;
    if (strstr(s, ": ") || strstr(s, " #")) return true;
    unsigned code;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (unprintable_at(p, &code)) return true;
    return false;
}

static void write_quoted(const char *s, FILE *out) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned code;
        int len = unprintable_at(p, &code);
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (len)
            fprintf(out, code < 0x100 ? "\\x%02x" : "\\u%04x", code);
        else
            fputc(*p, out);
        p += len ? len : 1;
    }
    fputc('"', out);
}

/* Keys longer than this are written as explicit keys ("? key"): libyaml reads a simple key of
 * at most 1024 characters, and escapes can make the written key four times longer. */
enum { MAX_SIMPLE_KEY = 200 };

static void write_yaml_scalar(const em_node *node, FILE *out) {
    if (em_node_scalar_type(node) == EM_SCALAR_STRING && needs_quotes(node->text))
        write_quoted(node->text, out);
    else
        fputs(node->text, out);
}

static void write_key(const char *key, FILE *out) {
    if (needs_quotes(key) || !strcmp(key, "<<"))
        write_quoted(key, out);
    else
        fputs(key, out);
}

static bool is_empty_collection(const em_node *n) {
    return n->kind != EM_NODE_SCALAR && n->count == 0;
}

static void write_yaml_node(const em_node *node, int indent, bool first_line_indented, FILE *out);

/* Writes what follows "key:" or "-": a scalar or empty collection on the same line, else a
 * nested block. A map inside a list starts on the dash's line ("- key: v"). */
static void write_yaml_value(const em_node *v, int indent, bool after_dash, FILE *out) {
    if (v->kind == EM_NODE_SCALAR) {
        if (v->text[0] || v->quoted) {
            fputc(' ', out);
            write_yaml_scalar(v, out);
        }
        fputc('\n', out);
    } else if (is_empty_collection(v)) {
        fputs(v->kind == EM_NODE_MAP ? " {}\n" : " []\n", out);
    } else if (after_dash) {
        fputc(' ', out);
        write_yaml_node(v, indent + 2, false, out);
    } else {
        fputc('\n', out);
        write_yaml_node(v, indent + 2, true, out);
    }
}

static void write_yaml_node(const em_node *node, int indent, bool first_line_indented, FILE *out) {
    if (node->kind == EM_NODE_SCALAR || is_empty_collection(node)) {
        if (first_line_indented) fprintf(out, "%*s", indent, "");
        if (node->kind == EM_NODE_SCALAR && !node->text[0] && !node->quoted)
            fputc('~', out); /* an empty document would not load */
        else if (node->kind == EM_NODE_SCALAR)
            write_yaml_scalar(node, out);
        else
            fputs(node->kind == EM_NODE_MAP ? "{}" : "[]", out);
        fputc('\n', out);
        return;
    }
    for (size_t i = 0; i < node->count; i++) {
        if (i > 0 || first_line_indented) fprintf(out, "%*s", indent, "");
        if (node->kind == EM_NODE_MAP) {
            const char *key = node->entries[i].key;
            if (strlen(key) > MAX_SIMPLE_KEY) {
                fputs("? ", out);
                write_key(key, out);
                fprintf(out, "\n%*s", indent, "");
            } else {
                write_key(key, out);
            }
            fputc(':', out);
            write_yaml_value(node->entries[i].value, indent, false, out);
        } else {
            fputc('-', out);
            write_yaml_value(node->items[i], indent, true, out);
        }
    }
}

void em_node_write_yaml(const em_node *node, FILE *out) {
    write_yaml_node(node, 0, true, out);
}

/* ---- writing JSON ---------------------------------------------------------------------- */

static void write_json_string(const char *s, FILE *out) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* The shortest %g form that reads back as the same double. */
static void write_json_double(double v, FILE *out) {
    char buf[64];
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, out);
    if (!strpbrk(buf, ".eE")) fputs(".0", out); /* keep it a float for the reader */
}

static void write_json_scalar(const em_node *node, FILE *out) {
    int64_t i;
    double d;
    switch (em_node_scalar_type(node)) {
    case EM_SCALAR_NULL:
        fputs("null", out);
        break;
    case EM_SCALAR_BOOL:
        fputs(node->text[0] == 't' || node->text[0] == 'T' ? "true" : "false", out);
        break;
    case EM_SCALAR_INT:
        if (parse_int(node->text, &i))
            fprintf(out, "%" PRId64, i);
        else
            write_json_double(strtod(node->text, NULL), out);
        break;
    case EM_SCALAR_FLOAT:
        d = parse_float(node->text);
        if (isfinite(d))
            write_json_double(d, out);
        else
            fputs("null", out); /* JSON has no infinities or NaN */
        break;
    case EM_SCALAR_STRING:
        write_json_string(node->text, out);
        break;
    }
}

static void write_json_node(const em_node *node, int indent, FILE *out) {
    if (node->kind == EM_NODE_SCALAR) {
        write_json_scalar(node, out);
        return;
    }
    bool map = node->kind == EM_NODE_MAP;
    if (node->count == 0) {
        fputs(map ? "{}" : "[]", out);
        return;
    }
    fputs(map ? "{\n" : "[\n", out);
    for (size_t i = 0; i < node->count; i++) {
        fprintf(out, "%*s", indent + 2, "");
        if (map) {
            write_json_string(node->entries[i].key, out);
            fputs(": ", out);
        }
        write_json_node(map ? node->entries[i].value : node->items[i], indent + 2, out);
        fputs(i + 1 < node->count ? ",\n" : "\n", out);
    }
    fprintf(out, "%*s%c", indent, "", map ? '}' : ']');
}

void em_node_write_json(const em_node *node, FILE *out) {
    write_json_node(node, 0, out);
    fputc('\n', out);
}
