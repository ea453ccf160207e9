/* Tests of the recipe tree: core-schema scalar typing, the typed getters and their messages,
 * path lookup, and writing YAML (which must load back to the same tree) and JSON. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/recipe.h"
#include "recipe_test_util.h"
#include "test.h"

static const em_mark here = {"t.yaml", 4, 12};

static void check_typing(void) {
    struct {
        const char *text;
        bool quoted;
        em_scalar_type type;
    } table[] = {
        {"", false, EM_SCALAR_NULL},       {"~", false, EM_SCALAR_NULL},
        {"null", false, EM_SCALAR_NULL},   {"Null", false, EM_SCALAR_NULL},
        {"NULL", false, EM_SCALAR_NULL},   {"nULL", false, EM_SCALAR_STRING},
        {"null", true, EM_SCALAR_STRING},  {"", true, EM_SCALAR_STRING},
        {"true", false, EM_SCALAR_BOOL},   {"False", false, EM_SCALAR_BOOL},
        {"TRUE", false, EM_SCALAR_BOOL},   {"yes", false, EM_SCALAR_STRING},
        {"on", false, EM_SCALAR_STRING},   {"true", true, EM_SCALAR_STRING},
        {"0", false, EM_SCALAR_INT},       {"-17", false, EM_SCALAR_INT},
        {"+17", false, EM_SCALAR_INT},     {"0x1F", false, EM_SCALAR_INT},
        {"0o17", false, EM_SCALAR_INT},    {"0o18", false, EM_SCALAR_STRING},
        {"0x", false, EM_SCALAR_STRING},   {"0xG", false, EM_SCALAR_STRING},
        {"-0x1", false, EM_SCALAR_STRING}, {"1_000", false, EM_SCALAR_STRING},
        {"12", true, EM_SCALAR_STRING},    {"1.5", false, EM_SCALAR_FLOAT},
        {"-1.5", false, EM_SCALAR_FLOAT},  {".5", false, EM_SCALAR_FLOAT},
        {"5.", false, EM_SCALAR_FLOAT},    {"1e3", false, EM_SCALAR_FLOAT},
        {"1E-3", false, EM_SCALAR_FLOAT},  {"+2.5e+10", false, EM_SCALAR_FLOAT},
        {".inf", false, EM_SCALAR_FLOAT},  {"-.Inf", false, EM_SCALAR_FLOAT},
        {".NAN", false, EM_SCALAR_FLOAT},  {"-.nan", false, EM_SCALAR_STRING},
        {".", false, EM_SCALAR_STRING},    {"1e", false, EM_SCALAR_STRING},
        {"e3", false, EM_SCALAR_STRING},   {"1.2.3", false, EM_SCALAR_STRING},
        {"abc", false, EM_SCALAR_STRING},  {">=2.14", false, EM_SCALAR_STRING},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        em_node *n = em_node_new_scalar(table[i].text, table[i].quoted, here);
        if (em_node_scalar_type(n) != table[i].type)
            fprintf(stderr, "typing of '%s' (quoted %d)\n", table[i].text, table[i].quoted);
        CHECK_INT_EQ(em_node_scalar_type(n), table[i].type);
        em_node_free(n);
    }
}

static void check_getters(void) {
    em_node *n = em_node_new_scalar("0x1F", false, here);
    int64_t i = 0;
    double d = 0;
    bool b = false;
    const char *s = NULL;
    CHECK(em_node_as_int(n, &i) == NULL);
    CHECK_INT_EQ(i, 31);
    CHECK(em_node_as_double(n, &d) == NULL);
    CHECK(d == 31.0);
    CHECK(em_node_as_string(n, &s) == NULL);
    CHECK_STR_EQ(s, "0x1F");
    em_node_free(n);

    n = em_node_new_scalar("0o17", false, here);
    CHECK(em_node_as_int(n, &i) == NULL);
    CHECK_INT_EQ(i, 15);
    em_node_free(n);
    n = em_node_new_scalar("-9223372036854775808", false, here);
    CHECK(em_node_as_int(n, &i) == NULL);
    CHECK(i == INT64_MIN);
    em_node_free(n);

    n = em_node_new_scalar("-.inf", false, here);
    CHECK(em_node_as_double(n, &d) == NULL);
    CHECK(isinf(d) && d < 0);
    em_node_free(n);
    n = em_node_new_scalar(".nan", false, here);
    CHECK(em_node_as_double(n, &d) == NULL);
    CHECK(isnan(d));
    em_node_free(n);
    n = em_node_new_scalar("2.5e-1", false, here);
    CHECK(em_node_as_double(n, &d) == NULL);
    CHECK(d == 0.25);
    em_node_free(n);
    n = em_node_new_scalar("False", false, here);
    CHECK(em_node_as_bool(n, &b) == NULL);
    CHECK(b == false);
    em_node_free(n);

    struct {
        const char *text;
        bool quoted;
        int which; /* 0 int, 1 double, 2 bool, 3 string */
        const char *message;
    } bad[] = {
        {"abc", false, 0, "t.yaml:4:12: expected an integer, found a string \"abc\""},
        {"12", true, 0, "t.yaml:4:12: expected an integer, found a string \"12\""},
        {"1.5", false, 0, "t.yaml:4:12: expected an integer, found a number 1.5"},
        {"9223372036854775808", false, 0,
         "t.yaml:4:12: integer 9223372036854775808 is out of range (at most 64 bits)"},
        {"0x8000000000000000", false, 0,
         "t.yaml:4:12: integer 0x8000000000000000 is out of range (at most 64 bits)"},
        {"true", false, 1, "t.yaml:4:12: expected a number, found a boolean true"},
        {"1", false, 2, "t.yaml:4:12: expected a boolean, found an integer 1"},
        {"~", false, 3, "t.yaml:4:12: expected a string, found null"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        n = em_node_new_scalar(bad[k].text, bad[k].quoted, here);
        em_status err = bad[k].which == 0   ? em_node_as_int(n, &i)
                        : bad[k].which == 1 ? em_node_as_double(n, &d)
                        : bad[k].which == 2 ? em_node_as_bool(n, &b)
                                            : em_node_as_string(n, &s);
        CHECK(err != NULL);
        if (err) {
            CHECK_STR_EQ(err->message, bad[k].message);
            CHECK_INT_EQ(err->exit_code, 2);
        }
        em_error_free(err);
        em_node_free(n);
    }
    em_node *map = em_node_new_map(here);
    em_status err = em_node_as_int(map, &i);
    CHECK_STR_EQ(err ? err->message : NULL, "t.yaml:4:12: expected an integer, found a map");
    em_error_free(err);
    err = em_node_as_string(NULL, &s);
    CHECK_STR_EQ(err ? err->message : NULL, "expected a string, found nothing");
    em_error_free(err);
    em_node_free(map);
}

static void check_lookup(void) {
    em_node *root = parse("a:\n  b:\n    c: 7\n  s: hello\n  f: 2.5\n  t: true\n  n: ~\n");
    CHECK_INT_EQ(em_node_get_int(em_node_get_path(root, "a.b"), "c", -1), 7);
    CHECK(em_node_get_path(root, "a.b.c") != NULL);
    CHECK(em_node_get_path(root, "a.x.c") == NULL);
    CHECK(em_node_get_path(root, "a.s.c") == NULL);
    const em_node *a = em_node_get(root, "a");
    CHECK_STR_EQ(em_node_get_string(a, "s", "none"), "hello");
    CHECK_STR_EQ(em_node_get_string(a, "n", "none"), "none");
    CHECK_STR_EQ(em_node_get_string(a, "missing", "none"), "none");
    CHECK(em_node_get_double(a, "f", 0) == 2.5);
    CHECK(em_node_get_bool(a, "t", false) == true);
    CHECK(em_node_get_bool(a, "missing", true) == true);
    CHECK_INT_EQ(em_node_get_int(a, "n", 42), 42);
    const em_map_entry *e = em_node_get_entry(a, "s");
    CHECK(e && e->key_mark.line == 4 && e->key_mark.col == 3);
    CHECK(e && e->value->mark.line == 4 && e->value->mark.col == 6);

    /* map_set replaces in place (keeping order), map_remove removes */
    em_node *m = em_node_get(root, "a");
    em_node_map_set(m, "s", here, em_node_new_scalar("x", false, here));
    CHECK_STR_EQ(m->entries[1].key, "s");
    CHECK_STR_EQ(m->entries[1].value->text, "x");
    CHECK(em_node_map_remove(m, "s"));
    CHECK(!em_node_map_remove(m, "s"));
    CHECK_INT_EQ(m->count, 4);
    CHECK_STR_EQ(m->entries[1].key, "f");
    em_node_free(root);
}

/* Structural equality: same kinds, keys in the same order, scalars of the same type and text. */
static bool same_tree(const em_node *a, const em_node *b) {
    if (a->kind != b->kind || a->count != b->count) return false;
    if (a->kind == EM_NODE_SCALAR)
        return em_node_scalar_type(a) == em_node_scalar_type(b) && strcmp(a->text, b->text) == 0;
    for (size_t i = 0; i < a->count; i++) {
        if (a->kind == EM_NODE_MAP && (strcmp(a->entries[i].key, b->entries[i].key) != 0 ||
                                       !same_tree(a->entries[i].value, b->entries[i].value)))
            return false;
        if (a->kind == EM_NODE_SEQ && !same_tree(a->items[i], b->items[i])) return false;
    }
    return true;
}

static char *write_to_string(const em_node *n, bool json) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (json)
        em_node_write_json(n, f);
    else
        em_node_write_yaml(n, f);
    fclose(f);
    return buf;
}

static void check_round_trip(void) {
    const char *text =
        "name: \"123\"\n"
        "plain: hello world\n"
        "quoted: {a: \"true\", b: \"null\", c: \"\", d: \"~\", e: \"0x10\", f: \"1e3\", g: "
        "\".inf\"}\n"
        "types: [1, -2, 0x1F, 0o7, 1.5, .inf, -.inf, .nan, true, False, null, ~, '']\n"
        "empty_value:\n"
        "special: [\"a: b\", \"x #y\", \"- z\", \"[q]\", \"{r}\", \"&s\", \"*t\", \"!u\", \"|v\", "
        "\">w\",\n"
        "          \"'x'\", '\"y\"', \"%z\", \"@a\", \"`b\", \" lead\", \"trail \", \"colon:\", "
        "\"?q\",\n"
        "          \"tab\\there\", \"new\\nline\", \"back\\\\slash\", \"bell\\a\", \"yes\", "
        "\"on\", \"N\",\n"
        "          \"1_000\", \"+5\", \".5x\", \"---\", \"...\", \"<<\", \"héllo ünïcode\", "
        "\"#c\", \",c\"]\n"
        "\"key: with colon\": 1\n"
        "\"<<\": not a merge\n"
        "\"true\": key\n"
        "nested:\n"
        "  - {a: 1, b: [x, {c: d}]}\n"
        "  - [[1, 2], [], {}]\n"
        "  - []\n"
        "  - {}\n"
        "  -\n"
        "block: |\n"
        "  line one\n"
        "    indented\n";
    em_node *a = parse(text);
    char *yaml = write_to_string(a, false);
    em_node *b = parse(yaml);
    CHECK(a && b && same_tree(a, b));
    if (a && b && !same_tree(a, b)) fprintf(stderr, "written:\n%s\n", yaml);
    /* writing the reloaded tree gives the same text */
    char *again = write_to_string(b, false);
    CHECK_STR_EQ(again, yaml);
    free(again);
    free(yaml);
    em_node_free(a);
    em_node_free(b);

    /* characters YAML cannot show as themselves are escaped; long keys are explicit keys */
    em_node *map = em_node_new_map(here);
    char long_key[1500];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    em_node_map_set(map, long_key, here, em_node_new_scalar("v", false, here));
    em_node_map_set(map, "nel\xc2\x85 ls\xe2\x80\xa8 bom\xef\xbb\xbf c1\xc2\x9f del\x7f", here,
                    em_node_new_scalar("\xef\xbf\xbe\x01 \xc2\xa0ok", true, here));
    em_node *nested = em_node_new_map(here);
    em_node_map_set(nested, long_key, here, em_node_new_seq(here));
    em_node_map_set(map, "nested", here, nested);
    yaml = write_to_string(map, false);
    CHECK_CONTAINS(
        yaml, "\"nel\\x85 ls\\u2028 bom\\ufeff c1\\x9f del\\x7f\": \"\\ufffe\\x01 \xc2\xa0ok\"\n");
    CHECK(strncmp(yaml, "? kkk", 5) == 0);
    b = parse(yaml);
    CHECK(b && same_tree(map, b));
    free(yaml);
    em_node_free(b);
    em_node_free(map);
    /* a null document is written as ~ (an empty one would not load) */
    a = parse("---\n");
    yaml = write_to_string(a, false);
    CHECK_STR_EQ(yaml, "~\n");
    free(yaml);
    em_node_free(a);

    /* the exact block layout */
    a = parse("a: {b: 1, c: [x, {d: e, f: g}, [h]]}\nl: []\n");
    yaml = write_to_string(a, false);
    CHECK_STR_EQ(yaml, "a:\n  b: 1\n  c:\n    - x\n    - d: e\n      f: g\n    - - h\nl: []\n");
    free(yaml);
    em_node_free(a);
}

static void check_json(void) {
    em_node *a =
        parse("s: \"q\\\"\\\\\\n\\t\\x01\"\ni: 0x10\nn: -7\nf: 2.5\ng: 1e3\nh: .inf\nz: ~\n"
              "b: True\nl: [1, {k: []}]\nm: {}\n");
    char *json = write_to_string(a, true);
    CHECK_STR_EQ(json, "{\n"
                       "  \"s\": \"q\\\"\\\\\\n\\t\\u0001\",\n"
                       "  \"i\": 16,\n"
                       "  \"n\": -7,\n"
                       "  \"f\": 2.5,\n"
                       "  \"g\": 1000.0,\n"
                       "  \"h\": null,\n"
                       "  \"z\": null,\n"
                       "  \"b\": true,\n"
                       "  \"l\": [\n"
                       "    1,\n"
                       "    {\n"
                       "      \"k\": []\n"
                       "    }\n"
                       "  ],\n"
                       "  \"m\": {}\n"
                       "}\n");
    free(json);
    em_node_free(a);
}

static void check_describe(void) {
    em_node *n = em_node_new_scalar("abc", false, here);
    char *d = em_node_describe(n);
    CHECK_STR_EQ(d, "a string \"abc\"");
    free(d);
    em_node_free(n);
    n = em_node_new_scalar("0123456789012345678901234567890123456789012345678901234567890123456789",
                           true, here);
    d = em_node_describe(n);
    CHECK_STR_EQ(d, "a string \"012345678901234567890123456789012345678901234567890123456...\"");
    free(d);
    em_node_free(n);
    n = em_node_new_scalar("first line\nsecond line", true, here);
    d = em_node_describe(n);
    CHECK_STR_EQ(d, "a string \"first line...\"");
    free(d);
    em_node_free(n);
    n = em_node_new_seq(here);
    d = em_node_describe(n);
    CHECK_STR_EQ(d, "a list");
    free(d);
    em_node_seq_append(n, em_node_new_scalar("1", false, here));
    em_node *c = em_node_clone(n);
    CHECK(c->count == 1 && strcmp(c->items[0]->text, "1") == 0 && c->items[0] != n->items[0]);
    em_node_free(c);
    em_node_free(n);
}

int main(void) {
    check_typing();
    check_getters();
    check_lookup();
    check_round_trip();
    check_json();
    check_describe();
    return test_finish();
}
