/* lm-eval's Jinja subset (see doc_template.h): a parser from the template text to literal
 * segments and expression trees, and an evaluator over one JSON document whose values are cJSON
 * items, with Python's string and list semantics for what the subset allows. */
#include "stages/tasks/doc_template.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

typedef enum expr_kind {
    EXPR_NAME,   /* name: a field of the document */
    EXPR_STRING, /* text */
    EXPR_INT,    /* number */
    EXPR_BOOL,   /* number: 0 or 1 */
    EXPR_NONE,
    EXPR_LIST,   /* args */
    EXPR_ATTR,   /* base.name */
    EXPR_ITEM,   /* base[args[0]] */
    EXPR_SLICE,  /* base[lo:hi], either NULL */
    EXPR_METHOD, /* base.name(args) */
    EXPR_FILTER, /* base | name(args) */
    EXPR_ADD,    /* base + args[0] */
    EXPR_NEG,    /* -base */
} expr_kind;

typedef struct expr {
    expr_kind kind;
    size_t offset; /* in the template text, for errors */
    char *text;    /* a name or a string literal */
    long long number;
    struct expr *base, *lo, *hi;
    struct expr **args;
    size_t arg_count;
} expr;

typedef struct segment {
    char *text; /* literal text, or NULL for an expression */
    expr *value;
} segment;

struct em_doc_template {
    char *what; /* the YAML key: "doc_to_text" */
    em_mark mark;
    segment *segments;
    size_t segment_count;
};

bool em_python_isspace(unsigned cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* A number Python holds as an int (exact in a double below 2^53). */
static bool is_integer(const cJSON *v) {
    return cJSON_IsNumber(v) && !(v->type & EM_JSON_FLOAT) &&
           v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9007199254740992.0;
}

bool em_python_str(const cJSON *value, char **out) {
    if (cJSON_IsString(value)) {
        *out = em_xstrdup(value->valuestring);
    } else if (cJSON_IsBool(value)) {
        *out = em_xstrdup(cJSON_IsTrue(value) ? "True" : "False");
    } else if (cJSON_IsNull(value)) {
        *out = em_xstrdup("None");
    } else if (is_integer(value)) {
        *out = em_xasprintf("%lld", (long long)value->valuedouble);
    } else {
        return false;
    }
    return true;
}

/* ---- parsing ---- */

typedef struct evaluator {
    const em_doc_template *tmpl;
    const cJSON *doc;
    const em_doc_source *source;
} evaluator;

/* A method or filter: its name, whether it is a method (base.name()) or a filter (base | name),
 * and how many arguments it takes. */
typedef em_status (*operation_fn)(const evaluator *ev, const expr *e, const cJSON *base,
                                  cJSON **args, cJSON **out);

typedef struct operation {
    const char *name;
    bool filter;
    size_t min_args, max_args;
    bool string_args; /* its arguments must be strings (index takes any value) */
    operation_fn apply;
} operation;

static const operation *find_operation(const char *name, bool filter);

typedef struct parser {
    const em_doc_template *tmpl;
    const char *text;
    size_t pos;
    bool verbatim;
} parser;

static em_status parse_error(const parser *p, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static em_status parse_error(const parser *p, size_t offset, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    em_mark at = p->tmpl->mark;
    size_t chars = 0;
    for (size_t i = 0; i < offset && p->text[i]; i++)
        if (((unsigned char)p->text[i] & 0xC0) != 0x80) chars++;
    em_status err;
    if (p->verbatim) {
        at.col += (int)chars;
        err = em_error_at(EM_EXIT_BAD_INPUT, at,
                          "%s: %s (evalmesh renders a subset of Jinja: docs/tasks.md)",
                          p->tmpl->what, what);
    } else {
        err = em_error_at(EM_EXIT_BAD_INPUT, at,
                          "%s: %s at character %zu of the template (evalmesh renders a subset of "
                          "Jinja: docs/tasks.md)",
                          p->tmpl->what, what, chars + 1);
    }
    return err;
}

static void expr_free(expr *e) {
    if (!e) return;
    free(e->text);
    expr_free(e->base);
    expr_free(e->lo);
    expr_free(e->hi);
    for (size_t i = 0; i < e->arg_count; i++) expr_free(e->args[i]);
    free(e->args);
    free(e);
}

static expr *expr_new(expr_kind kind, size_t offset) {
    expr *e = em_xcalloc(1, sizeof *e);
    e->kind = kind;
    e->offset = offset;
    return e;
}

static void expr_add_arg(expr *e, expr *arg) {
    e->args = em_xrealloc(e->args, (e->arg_count + 1) * sizeof *e->args);
    e->args[e->arg_count++] = arg;
}

static void skip_space(parser *p) {
    while (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' || p->text[p->pos] == '\n') p->pos++;
}

static bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}

static char *read_name(parser *p) {
    size_t start = p->pos;
    while (is_name_char(p->text[p->pos])) p->pos++;
    char *name = em_xmalloc(p->pos - start + 1);
    memcpy(name, p->text + start, p->pos - start);
    name[p->pos - start] = '\0';
    return name;
}

static em_status parse_expr(parser *p, expr **out);

/* A string literal with the escapes Jinja's unicode-escape decoding gives the same way. */
static em_status parse_string(parser *p, expr **out) {
    char quote = p->text[p->pos];
    size_t start = p->pos++;
    size_t cap = 16, len = 0;
    char *s = em_xmalloc(cap);
    for (;;) {
        char c = p->text[p->pos];
        if (c == '\0') {
            free(s);
            return parse_error(p, start, "a string literal that does not end");
        }
        p->pos++;
        if (c == quote) break;
        if (c == '\\') {
            char e = p->text[p->pos];
            const char *map = strchr("\\\\''\"\"n\nt\tr\r", e);
            if (!e || !map || ((map - "\\\\''\"\"n\nt\tr\r") % 2)) {
                free(s);
                return parse_error(p, p->pos - 1, "the escape '\\%c' in a string literal", e);
            }
            c = map[1];
            p->pos++;
        }
        if (len + 2 > cap) s = em_xrealloc(s, cap *= 2);
        s[len++] = c;
    }
    s[len] = '\0';
    *out = expr_new(EXPR_STRING, start);
    (*out)->text = s;
    return NULL;
}

/* Arguments of a call or a list up to `close`; p->pos is after the opening bracket. */
static em_status parse_args(parser *p, expr *e, char close) {
    skip_space(p);
    if (p->text[p->pos] == close) {
        p->pos++;
        return NULL;
    }
    for (;;) {
        expr *arg = NULL;
        em_status err = parse_expr(p, &arg);
        if (arg) expr_add_arg(e, arg);
        if (err) return err;
        skip_space(p);
        if (p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->text[p->pos] == close) {
            p->pos++;
            return NULL;
        }
        return parse_error(p, p->pos, "expected ',' or '%c'", close);
    }
}

/* The parse functions leave in *out what they built, also on an error (the caller frees it). */
static em_status parse_primary(parser *p, expr **out) {
    *out = NULL;
    skip_space(p);
    char c = p->text[p->pos];
    size_t start = p->pos;
    em_status err;
    if (c == '\'' || c == '"') return parse_string(p, out);
    if (c >= '0' && c <= '9') {
        long long v = 0;
        while (p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
            if (v > 1000000000000000LL) return parse_error(p, start, "an integer too large");
            v = v * 10 + (p->text[p->pos++] - '0');
        }
        if (p->text[p->pos] == '.' || p->text[p->pos] == '_' || is_name_start(p->text[p->pos]))
            return parse_error(p, start, "a number that is not a plain integer");
        *out = expr_new(EXPR_INT, start);
        (*out)->number = v;
        return NULL;
    }
    if (c == '-') {
        p->pos++;
        *out = expr_new(EXPR_NEG, start);
        return parse_primary(p, &(*out)->base);
    }
    if (c == '[') {
        p->pos++;
        *out = expr_new(EXPR_LIST, start);
        return parse_args(p, *out, ']');
    }
    if (c == '(') {
        p->pos++;
        if ((err = parse_expr(p, out))) return err;
        skip_space(p);
        if (p->text[p->pos] != ')') return parse_error(p, p->pos, "expected ')'");
        p->pos++;
        return NULL;
    }
    if (is_name_start(c)) {
        char *name = read_name(p);
        static const char *const trues[] = {"true", "True"}, *const falses[] = {"false", "False"},
                                 *const nones[] = {"none", "None"};
        for (int i = 0; i < 2; i++) {
            if (!strcmp(name, trues[i]) || !strcmp(name, falses[i])) {
                *out = expr_new(EXPR_BOOL, start);
                (*out)->number = !strcmp(name, trues[i]);
                free(name);
                return NULL;
            }
            if (!strcmp(name, nones[i])) {
                *out = expr_new(EXPR_NONE, start);
                free(name);
                return NULL;
            }
        }
        *out = expr_new(EXPR_NAME, start);
        (*out)->text = name;
        return NULL;
    }
    if (c == '\0' || (c == '}' && p->text[p->pos + 1] == '}'))
        return parse_error(p, start, "an expression is missing");
    return parse_error(p, start, "unsupported expression starting with '%c'", c);
}

/* Jinja's `obj.name` takes a dict's method before its item of that name. */
static bool python_dict_method(const char *name) {
    static const char *const methods[] = {"clear",      "copy",   "fromkeys", "get",
                                          "items",      "keys",   "pop",      "popitem",
                                          "setdefault", "update", "values"};
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
        if (!strcmp(methods[i], name)) return true;
    return false;
}

/* A method or filter the subset has, with as many arguments as it takes. */
static em_status check_operation(const parser *p, const expr *e, size_t name_offset) {
    bool filter = e->kind == EXPR_FILTER;
    const operation *op = find_operation(e->text, filter);
    if (!op)
        return parse_error(p, name_offset, "the %s '%s' is not supported",
                           filter ? "filter" : "method", e->text);
    if (e->arg_count < op->min_args || e->arg_count > op->max_args)
        return parse_error(p, name_offset, "%s takes %zu to %zu arguments, not %zu", e->text,
                           op->min_args, op->max_args, e->arg_count);
    return NULL;
}

static em_status parse_postfix(parser *p, expr **out) {
    em_status err = parse_primary(p, out);
    if (err) return err;
    for (;;) {
        skip_space(p);
        char c = p->text[p->pos];
        size_t start = p->pos;
        if (c == '.') {
            p->pos++;
            skip_space(p);
            if (!is_name_start(p->text[p->pos]))
                return parse_error(p, p->pos, "expected a name after '.'");
            size_t name_offset = p->pos;
            expr *e = expr_new(EXPR_ATTR, start);
            e->text = read_name(p);
            e->base = *out;
            *out = e;
            if (p->text[p->pos] != '(' && python_dict_method(e->text))
                return parse_error(p, name_offset,
                                   "'.%s' is a Python dict method in Jinja, not the field: write "
                                   "['%s']",
                                   e->text, e->text);
            if (p->text[p->pos] == '(') {
                p->pos++;
                e->kind = EXPR_METHOD;
                if ((err = parse_args(p, e, ')')) || (err = check_operation(p, e, name_offset)))
                    return err;
            }
        } else if (c == '[') {
            p->pos++;
            skip_space(p);
            expr *e = expr_new(EXPR_ITEM, start);
            e->base = *out;
            *out = e;
            expr *first = NULL;
            if (p->text[p->pos] != ':') err = parse_expr(p, &first);
            if (err) {
                if (first) expr_add_arg(e, first);
                return err;
            }
            skip_space(p);
            if (p->text[p->pos] == ':') {
                p->pos++;
                e->kind = EXPR_SLICE;
                e->lo = first;
                skip_space(p);
                if (p->text[p->pos] != ']' && (err = parse_expr(p, &e->hi))) return err;
                skip_space(p);
            } else {
                expr_add_arg(e, first);
            }
            if (p->text[p->pos] != ']')
                return parse_error(p, p->pos, "expected ']' (a slice takes no step)");
            p->pos++;
        } else {
            return NULL;
        }
    }
}

static em_status parse_filtered(parser *p, expr **out) {
    em_status err = parse_postfix(p, out);
    if (err) return err;
    for (;;) {
        skip_space(p);
        if (p->text[p->pos] != '|') return NULL;
        size_t start = p->pos++;
        skip_space(p);
        if (!is_name_start(p->text[p->pos]))
            return parse_error(p, p->pos, "expected a filter name after '|'");
        size_t name_offset = p->pos;
        expr *e = expr_new(EXPR_FILTER, start);
        e->text = read_name(p);
        e->base = *out;
        *out = e;
        if (p->text[p->pos] == '(') {
            p->pos++;
            if ((err = parse_args(p, e, ')'))) return err;
        }
        if ((err = check_operation(p, e, name_offset))) return err;
    }
}

static em_status parse_expr(parser *p, expr **out) {
    em_status err = parse_filtered(p, out);
    if (err) return err;
    for (;;) {
        skip_space(p);
        if (p->text[p->pos] != '+') return NULL;
        expr *e = expr_new(EXPR_ADD, p->pos++);
        e->base = *out;
        *out = e;
        expr *rhs = NULL;
        err = parse_filtered(p, &rhs);
        if (rhs) expr_add_arg(e, rhs);
        if (err) return err;
    }
}

static void add_segment(em_doc_template *t, char *text, expr *value) {
    t->segments = em_xrealloc(t->segments, (t->segment_count + 1) * sizeof *t->segments);
    t->segments[t->segment_count++] = (segment){text, value};
}

/* Literal text up to the next "{{", "{%" or "{#", with Jinja's newline normalization. */
static void add_text(em_doc_template *t, const char *s, size_t len) {
    if (!len) return;
    char *text = em_xmalloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\r') {
            text[n++] = '\n';
            if (i + 1 < len && s[i + 1] == '\n') i++;
        } else {
            text[n++] = s[i];
        }
    }
    text[n] = '\0';
    add_segment(t, text, NULL);
}

em_status em_doc_template_parse(const char *text, const char *what, em_mark mark, bool verbatim,
                                em_doc_template **out) {
    em_doc_template *t = em_xcalloc(1, sizeof *t);
    t->what = em_xstrdup(what);
    t->mark = mark;
    parser p = {t, text, 0, verbatim};
    em_status err = NULL;
    size_t text_start = 0;
    while (!err && text[p.pos]) {
        if (text[p.pos] != '{' ||
            (text[p.pos + 1] != '{' && text[p.pos + 1] != '%' && text[p.pos + 1] != '#')) {
            p.pos++;
            continue;
        }
        add_text(t, text + text_start, p.pos - text_start);
        if (text[p.pos + 1] == '%') {
            err = parse_error(&p, p.pos, "'{%%' blocks are not supported");
            break;
        }
        if (text[p.pos + 1] == '#') {
            err = parse_error(&p, p.pos, "'{#' comments are not supported");
            break;
        }
        size_t open = p.pos;
        p.pos += 2;
        if (text[p.pos] == '-' || text[p.pos] == '+') {
            err =
                parse_error(&p, open, "whitespace control ('{{%c') is not supported", text[p.pos]);
            break;
        }
        expr *e = NULL;
        if ((err = parse_expr(&p, &e))) {
            expr_free(e);
            break;
        }
        skip_space(&p);
        if (text[p.pos] == '-' && text[p.pos + 1] == '}') {
            expr_free(e);
            err = parse_error(&p, p.pos, "whitespace control ('-}}') is not supported");
            break;
        }
        if (text[p.pos] != '}' || text[p.pos + 1] != '}') {
            expr_free(e);
            if (text[p.pos] == '\0') {
                err = parse_error(&p, open, "'{{' without its '}}'");
            } else if (text[p.pos] == '|' || text[p.pos] == '.') {
                err = parse_error(&p, p.pos, "unsupported syntax");
            } else {
                err = parse_error(&p, p.pos, "unsupported operator or syntax '%c'", text[p.pos]);
            }
            break;
        }
        p.pos += 2;
        add_segment(t, NULL, e);
        text_start = p.pos;
    }
    if (!err) add_text(t, text + text_start, p.pos - text_start);
    if (err) {
        em_doc_template_free(t);
        return err;
    }
    *out = t;
    return NULL;
}

void em_doc_template_free(em_doc_template *tmpl) {
    if (!tmpl) return;
    for (size_t i = 0; i < tmpl->segment_count; i++) {
        free(tmpl->segments[i].text);
        expr_free(tmpl->segments[i].value);
    }
    free(tmpl->segments);
    free(tmpl->what);
    free(tmpl);
}

bool em_doc_template_is_expression(const em_doc_template *tmpl) {
    return tmpl->segment_count == 1 && tmpl->segments[0].value;
}

/* ---- evaluation ---- */

static em_status eval_error(const evaluator *ev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static em_status eval_error(const evaluator *ev, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    em_status err = em_error_newv(EM_EXIT_BAD_INPUT, fmt, ap);
    va_end(ap);
    char where[512];
    em_mark doc_mark = {em_intern(ev->source->data_file), ev->source->line, 0};
    return em_error_prefix_at(err, doc_mark, "document %zu: %s (%s)", ev->source->doc_index,
                              ev->tmpl->what,
                              em_mark_format(ev->tmpl->mark, where, (int)sizeof where));
}

/* Byte offsets of a UTF-8 string's code points, and its length in code points. */
static size_t *code_points(const char *s, size_t *count) {
    size_t len = strlen(s), n = 0;
    size_t *at = em_xmalloc((len + 1) * sizeof *at);
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) at[n++] = i;
    at[n] = len;
    *count = n;
    return at;
}

static cJSON *string_of(const char *s, size_t len) {
    char *copy = em_xmalloc(len + 1);
    memcpy(copy, s, len);
    copy[len] = '\0';
    cJSON *v = cJSON_CreateString(copy);
    free(copy);
    return v;
}

static bool json_equal(const cJSON *a, const cJSON *b) {
    if (cJSON_IsBool(a) || cJSON_IsBool(b) || cJSON_IsNumber(a) || cJSON_IsNumber(b)) {
        /* Python: True == 1 and 1 == 1.0 */
        double x, y;
        if (cJSON_IsBool(a))
            x = cJSON_IsTrue(a);
        else if (cJSON_IsNumber(a))
            x = a->valuedouble;
        else
            return false;
        if (cJSON_IsBool(b))
            y = cJSON_IsTrue(b);
        else if (cJSON_IsNumber(b))
            y = b->valuedouble;
        else
            return false;
        return x == y;
    }
    if (cJSON_IsString(a)) return cJSON_IsString(b) && !strcmp(a->valuestring, b->valuestring);
    if (cJSON_IsNull(a)) return cJSON_IsNull(b);
    if (cJSON_IsArray(a)) {
        if (!cJSON_IsArray(b) || cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return false;
        for (const cJSON *x = a->child, *y = b->child; x; x = x->next, y = y->next)
            if (!json_equal(x, y)) return false;
        return true;
    }
    if (cJSON_IsObject(a)) {
        if (!cJSON_IsObject(b) || cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return false;
        for (const cJSON *x = a->child; x; x = x->next) {
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y || !json_equal(x, y)) return false;
        }
        return true;
    }
    return false;
}

static em_status eval_expr(const evaluator *ev, const expr *e, cJSON **out);

/* Whether code point cp (at s) is in the set chars (NULL: Python whitespace). */
static bool strip_member(const char *chars, uint32_t cp) {
    if (!chars) return em_python_isspace(cp);
    for (const char *c = chars; *c;) {
        int n;
        if (em_utf8_decode(c, &n) == cp) return true;
        c += n;
    }
    return false;
}

static cJSON *strip(const char *s, const char *chars, bool left, bool right) {
    size_t n;
    size_t *at = code_points(s, &n);
    size_t lo = 0, hi = n;
    int len;
    while (left && lo < hi && strip_member(chars, em_utf8_decode(s + at[lo], &len))) lo++;
    while (right && hi > lo && strip_member(chars, em_utf8_decode(s + at[hi - 1], &len))) hi--;
    cJSON *v = string_of(s + at[lo], at[hi] - at[lo]);
    free(at);
    return v;
}

static cJSON *split(const char *s, const char *sep) {
    cJSON *list = cJSON_CreateArray();
    if (sep) {
        size_t seplen = strlen(sep);
        const char *from = s;
        for (const char *hit; (hit = strstr(from, sep)); from = hit + seplen)
            cJSON_AddItemToArray(list, string_of(from, (size_t)(hit - from)));
        cJSON_AddItemToArray(list, cJSON_CreateString(from));
        return list;
    }
    size_t n;
    size_t *at = code_points(s, &n);
    int len;
    for (size_t i = 0; i < n;) {
        while (i < n && em_python_isspace(em_utf8_decode(s + at[i], &len))) i++;
        if (i == n) break;
        size_t start = i;
        while (i < n && !em_python_isspace(em_utf8_decode(s + at[i], &len))) i++;
        cJSON_AddItemToArray(list, string_of(s + at[start], at[i] - at[start]));
    }
    free(at);
    return list;
}

static cJSON *replace(const char *s, const char *old, const char *new_text) {
    size_t oldlen = strlen(old), newlen = strlen(new_text), cap = strlen(s) + 1, len = 0;
    char *r = em_xmalloc(cap);
    for (const char *from = s;;) {
        const char *hit = strstr(from, old);
        size_t keep = hit ? (size_t)(hit - from) : strlen(from);
        size_t need = len + keep + (hit ? newlen : 0) + 1;
        if (need > cap) r = em_xrealloc(r, cap = need * 2);
        memcpy(r + len, from, keep);
        len += keep;
        if (!hit) break;
        memcpy(r + len, new_text, newlen);
        len += newlen;
        from = hit + oldlen;
    }
    r[len] = '\0';
    cJSON *v = cJSON_CreateString(r);
    free(r);
    return v;
}

static em_status op_strip(const evaluator *ev, const expr *e, const cJSON *base, cJSON **args,
                          cJSON **out) {
    if (!cJSON_IsString(base)) return eval_error(ev, "%s applies to a string", e->text);
    const char *chars = e->arg_count ? args[0]->valuestring : NULL;
    bool left = strcmp(e->text, "rstrip") != 0, right = strcmp(e->text, "lstrip") != 0;
    *out = strip(base->valuestring, chars, left, right);
    return NULL;
}

static em_status op_split(const evaluator *ev, const expr *e, const cJSON *base, cJSON **args,
                          cJSON **out) {
    if (!cJSON_IsString(base)) return eval_error(ev, "split applies to a string");
    if (e->arg_count && !args[0]->valuestring[0])
        return eval_error(ev, "split(''): empty separator");
    *out = split(base->valuestring, e->arg_count ? args[0]->valuestring : NULL);
    return NULL;
}

static em_status op_replace(const evaluator *ev, const expr *e, const cJSON *base, cJSON **args,
                            cJSON **out) {
    if (!cJSON_IsString(base)) return eval_error(ev, "replace applies to a string");
    if (!args[0]->valuestring[0])
        return eval_error(ev, "replace with an empty old string is not supported");
    *out = replace(base->valuestring, args[0]->valuestring, args[1]->valuestring);
    return NULL;
}

static em_status op_index(const evaluator *ev, const expr *e, const cJSON *base, cJSON **args,
                          cJSON **out) {
    if (!cJSON_IsArray(base)) return eval_error(ev, "index() applies to a list here");
    int i = 0;
    for (const cJSON *item = base->child; item; item = item->next, i++) {
        if (json_equal(item, args[0])) {
            *out = cJSON_CreateNumber(i);
            return NULL;
        }
    }
    char *shown = cJSON_PrintUnformatted(args[0]);
    em_status err = eval_error(ev, "index(): %s is not in the list", shown);
    free(shown);
    return err;
}

static em_status op_join(const evaluator *ev, const expr *e, const cJSON *base, cJSON **args,
                         cJSON **out) {
    if (!cJSON_IsArray(base)) return eval_error(ev, "join applies to a list");
    const char *sep = e->arg_count ? args[0]->valuestring : "";
    size_t len = 0, cap = 64;
    char *r = em_xmalloc(cap);
    r[0] = '\0';
    for (const cJSON *item = base->child; item; item = item->next) {
        char *s;
        if (!em_python_str(item, &s)) {
            free(r);
            return eval_error(ev, "join: an item that is not a string, an integer, a bool or null");
        }
        size_t need = len + strlen(s) + strlen(sep) + 1;
        if (need > cap) r = em_xrealloc(r, cap = need * 2);
        if (item != base->child) len += (size_t)sprintf(r + len, "%s", sep);
        len += (size_t)sprintf(r + len, "%s", s);
        free(s);
    }
    *out = cJSON_CreateString(r);
    free(r);
    return NULL;
}

static em_status op_length(const evaluator *ev, const expr *e, const cJSON *base, cJSON **args,
                           cJSON **out) {
    size_t n;
    if (cJSON_IsString(base))
        free(code_points(base->valuestring, &n));
    else if (cJSON_IsArray(base) || cJSON_IsObject(base))
        n = (size_t)cJSON_GetArraySize(base);
    else
        return eval_error(ev, "length applies to a string, a list or an object");
    *out = cJSON_CreateNumber((double)n);
    return NULL;
}

static em_status op_first_last(const evaluator *ev, const expr *e, const cJSON *base, cJSON **args,
                               cJSON **out) {
    bool first = !strcmp(e->text, "first");
    if (cJSON_IsArray(base) && base->child) {
        const cJSON *item = base->child;
        if (!first) item = cJSON_GetArrayItem(base, cJSON_GetArraySize(base) - 1);
        *out = cJSON_Duplicate(item, true);
        return NULL;
    }
    if (cJSON_IsString(base) && base->valuestring[0]) {
        size_t n;
        size_t *at = code_points(base->valuestring, &n);
        size_t i = first ? 0 : n - 1;
        *out = string_of(base->valuestring + at[i], at[i + 1] - at[i]);
        free(at);
        return NULL;
    }
    return eval_error(ev, "%s of an empty list or string, or of something else", e->text);
}

static const operation operations[] = {
    {"strip", false, 0, 1, true, op_strip},     {"lstrip", false, 0, 1, true, op_strip},
    {"rstrip", false, 0, 1, true, op_strip},    {"split", false, 0, 1, true, op_split},
    {"replace", false, 2, 2, true, op_replace}, {"index", false, 1, 1, false, op_index},
    {"trim", true, 0, 1, true, op_strip},       {"join", true, 0, 1, true, op_join},
    {"length", true, 0, 0, true, op_length},    {"count", true, 0, 0, true, op_length},
    {"first", true, 0, 0, true, op_first_last}, {"last", true, 0, 0, true, op_first_last},
    {"replace", true, 2, 2, true, op_replace},
};

static const operation *find_operation(const char *name, bool filter) {
    for (size_t i = 0; i < sizeof operations / sizeof *operations; i++)
        if (operations[i].filter == filter && !strcmp(operations[i].name, name))
            return &operations[i];
    return NULL;
}

static em_status eval_operation(const evaluator *ev, const expr *e, cJSON **out) {
    const operation *op = find_operation(e->text, e->kind == EXPR_FILTER);
    cJSON *base = NULL, *args[2] = {NULL, NULL};
    em_status err = eval_expr(ev, e->base, &base);
    for (size_t i = 0; !err && i < e->arg_count; i++) {
        err = eval_expr(ev, e->args[i], &args[i]);
        if (!err && op->string_args && !cJSON_IsString(args[i]))
            err = eval_error(ev, "%s() takes strings here", e->text);
    }
    if (!err) err = op->apply(ev, e, base, args, out);
    cJSON_Delete(base);
    cJSON_Delete(args[0]);
    cJSON_Delete(args[1]);
    return err;
}

/* Python's index of a sequence of n (negative counts from the end). */
static bool sequence_index(long long i, size_t n, size_t *at) {
    if (i < 0) i += (long long)n;
    if (i < 0 || i >= (long long)n) return false;
    *at = (size_t)i;
    return true;
}

static size_t slice_bound(long long i, size_t n) {
    if (i < 0) i += (long long)n;
    if (i < 0) return 0;
    return (size_t)i > n ? n : (size_t)i;
}

static em_status eval_item(const evaluator *ev, const expr *e, cJSON *base, const cJSON *key,
                           const char *shown, cJSON **out) {
    if (cJSON_IsObject(base) && cJSON_IsString(key)) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(base, key->valuestring);
        if (!v) return eval_error(ev, "the field '%s' is missing", shown);
        *out = cJSON_Duplicate(v, true);
        return NULL;
    }
    if ((cJSON_IsArray(base) || cJSON_IsString(base)) && is_integer(key)) {
        size_t at;
        if (cJSON_IsArray(base)) {
            if (!sequence_index((long long)key->valuedouble, (size_t)cJSON_GetArraySize(base), &at))
                return eval_error(ev, "'%s': index %lld is out of range of a list of %d", shown,
                                  (long long)key->valuedouble, cJSON_GetArraySize(base));
            *out = cJSON_Duplicate(cJSON_GetArrayItem(base, (int)at), true);
            return NULL;
        }
        size_t n;
        size_t *cp = code_points(base->valuestring, &n);
        if (!sequence_index((long long)key->valuedouble, n, &at)) {
            free(cp);
            return eval_error(ev, "'%s': index %lld is out of range of a string of %zu", shown,
                              (long long)key->valuedouble, n);
        }
        *out = string_of(base->valuestring + cp[at], cp[at + 1] - cp[at]);
        free(cp);
        return NULL;
    }
    return eval_error(ev,
                      "'%s': cannot take this item (an object takes a string key, a list or "
                      "string an integer)",
                      shown);
}

/* How an expression names what it reads, for messages: "choices.text", "answers['text']". */
static char *expr_path(const expr *e) {
    switch (e->kind) {
    case EXPR_NAME:
        return em_xstrdup(e->text);
    case EXPR_ATTR: {
        char *base = expr_path(e->base);
        char *r = em_xasprintf("%s.%s", base, e->text);
        free(base);
        return r;
    }
    case EXPR_ITEM: {
        char *base = expr_path(e->base);
        const expr *k = e->args[0];
        char *r = k->kind == EXPR_STRING ? em_xasprintf("%s['%s']", base, k->text)
                  : k->kind == EXPR_INT  ? em_xasprintf("%s[%lld]", base, k->number)
                                         : em_xasprintf("%s[...]", base);
        free(base);
        return r;
    }
    default:
        return em_xstrdup("...");
    }
}

static em_status eval_expr(const evaluator *ev, const expr *e, cJSON **out) {
    *out = NULL;
    em_status err = NULL;
    cJSON *base = NULL, *key = NULL;
    char *path = NULL;
    switch (e->kind) {
    case EXPR_NAME: {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev->doc, e->text);
        if (!v) return eval_error(ev, "the document has no field '%s'", e->text);
        *out = cJSON_Duplicate(v, true);
        return NULL;
    }
    case EXPR_STRING:
        *out = cJSON_CreateString(e->text);
        return NULL;
    case EXPR_INT:
        *out = cJSON_CreateNumber((double)e->number);
        return NULL;
    case EXPR_BOOL:
        *out = cJSON_CreateBool(e->number != 0);
        return NULL;
    case EXPR_NONE:
        *out = cJSON_CreateNull();
        return NULL;
    case EXPR_LIST:
        *out = cJSON_CreateArray();
        for (size_t i = 0; i < e->arg_count && !err; i++) {
            cJSON *item;
            if (!(err = eval_expr(ev, e->args[i], &item))) cJSON_AddItemToArray(*out, item);
        }
        break;
    case EXPR_ATTR:
        if ((err = eval_expr(ev, e->base, &base))) break;
        if (!cJSON_IsObject(base)) {
            path = expr_path(e);
            err = eval_error(ev, "'%s': only an object's fields can be named with '.'", path);
            break;
        }
        key = cJSON_CreateString(e->text);
        path = expr_path(e);
        err = eval_item(ev, e, base, key, path, out);
        break;
    case EXPR_ITEM:
        if ((err = eval_expr(ev, e->base, &base))) break;
        if ((err = eval_expr(ev, e->args[0], &key))) break;
        path = expr_path(e);
        err = eval_item(ev, e, base, key, path, out);
        break;
    case EXPR_SLICE: {
        if ((err = eval_expr(ev, e->base, &base))) break;
        long long bounds[2];
        const expr *ends[2] = {e->lo, e->hi};
        for (int i = 0; i < 2 && !err; i++) {
            cJSON *v = NULL;
            if (!ends[i]) {
                bounds[i] = i ? LLONG_MAX : 0;
            } else if (!(err = eval_expr(ev, ends[i], &v))) {
                if (is_integer(v))
                    bounds[i] = (long long)v->valuedouble;
                else
                    err = eval_error(ev, "a slice bound that is not an integer");
            }
            cJSON_Delete(v);
        }
        if (err) break;
        if (cJSON_IsArray(base)) {
            size_t n = (size_t)cJSON_GetArraySize(base);
            size_t lo = slice_bound(bounds[0], n), hi = slice_bound(bounds[1], n);
            *out = cJSON_CreateArray();
            for (size_t i = lo; i < hi; i++)
                cJSON_AddItemToArray(*out, cJSON_Duplicate(cJSON_GetArrayItem(base, (int)i), true));
        } else if (cJSON_IsString(base)) {
            size_t n;
            size_t *cp = code_points(base->valuestring, &n);
            size_t lo = slice_bound(bounds[0], n), hi = slice_bound(bounds[1], n);
            if (hi < lo) hi = lo;
            *out = string_of(base->valuestring + cp[lo], cp[hi] - cp[lo]);
            free(cp);
        } else {
            err = eval_error(ev, "a slice of something that is not a list or a string");
        }
        break;
    }
    case EXPR_METHOD:
    case EXPR_FILTER:
        return eval_operation(ev, e, out);
    case EXPR_ADD:
        if ((err = eval_expr(ev, e->base, &base))) break;
        if ((err = eval_expr(ev, e->args[0], &key))) break;
        if (cJSON_IsString(base) && cJSON_IsString(key)) {
            char *s = em_xasprintf("%s%s", base->valuestring, key->valuestring);
            *out = cJSON_CreateString(s);
            free(s);
        } else if (is_integer(base) && is_integer(key)) {
            *out = cJSON_CreateNumber(base->valuedouble + key->valuedouble);
        } else if (cJSON_IsArray(base) && cJSON_IsArray(key)) {
            *out = cJSON_Duplicate(base, true);
            for (const cJSON *item = key->child; item; item = item->next)
                cJSON_AddItemToArray(*out, cJSON_Duplicate(item, true));
        } else {
            err = eval_error(ev, "'+' needs two strings, two integers or two lists");
        }
        break;
    case EXPR_NEG:
        if ((err = eval_expr(ev, e->base, &base))) break;
        if (is_integer(base))
            *out = cJSON_CreateNumber(-base->valuedouble);
        else
            err = eval_error(ev, "'-' needs an integer");
        break;
    }
    cJSON_Delete(base);
    cJSON_Delete(key);
    free(path);
    if (err) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return err;
}

em_status em_doc_template_evaluate(const em_doc_template *tmpl, const cJSON *doc,
                                   const em_doc_source *source, cJSON **out) {
    evaluator ev = {tmpl, doc, source};
    return eval_expr(&ev, tmpl->segments[0].value, out);
}

em_status em_doc_template_render(const em_doc_template *tmpl, const cJSON *doc,
                                 const em_doc_source *source, char **out) {
    evaluator ev = {tmpl, doc, source};
    size_t len = 0, cap = 64;
    char *r = em_xmalloc(cap);
    r[0] = '\0';
    for (size_t i = 0; i < tmpl->segment_count; i++) {
        const segment *s = &tmpl->segments[i];
        char *piece;
        if (s->text) {
            piece = em_xstrdup(s->text);
        } else {
            cJSON *v;
            em_status err = eval_expr(&ev, s->value, &v);
            if (!err && !em_python_str(v, &piece)) {
                err = eval_error(&ev,
                                 "rendering %s is outside evalmesh's subset (it renders a "
                                 "string, an integer, a bool or null)",
                                 cJSON_IsArray(v)    ? "a list"
                                 : cJSON_IsObject(v) ? "an object"
                                                     : "a number Python holds as a float");
            }
            cJSON_Delete(v);
            if (err) {
                free(r);
                return err;
            }
        }
        size_t n = strlen(piece);
        if (len + n + 1 > cap) r = em_xrealloc(r, cap = (len + n + 1) * 2);
        memcpy(r + len, piece, n + 1);
        len += n;
        free(piece);
    }
    *out = r;
    return NULL;
}
