/* Tests of the schema validator: each keyword's check and exact message, defaults filled in
 * (also inside the matching oneOf branch only), "did you mean", best-branch messages for oneOf
 * and anyOf, errors in schemas themselves, and that every schema built into evalmesh loads. */
#include <stdlib.h>
#include <string.h>

#include "runner/recipe/embedded.h"
#include "runner/recipe/recipe.h"
#include "runner/recipe/schema.h"
#include "recipe_test_util.h"
#include "test.h"

static em_schema *schema;

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int c;
    while ((c = fgetc(f)) != EOF) fputc(c, mem);
    fclose(mem);
    fclose(f);
    return text;
}

/* Validates yaml (a stage map) and returns the completed tree; the caller frees it. */
static em_node *valid(const char *yaml) {
    em_node *n = parse(yaml);
    em_status err = em_schema_validate(schema, n, "stage 'wiki'");
    if (err) fprintf(stderr, "unexpected error for %s: %s\n", yaml, err->message);
    CHECK(err == NULL);
    em_error_free(err);
    return n;
}

static void invalid_with(const em_schema *s, const char *what, const char *yaml,
                         const char *message) {
    em_node *n = parse(yaml);
    em_status err = em_schema_validate(s, n, what);
    CHECK(err != NULL);
    if (err) {
        CHECK_STR_EQ(err->message, message);
        CHECK_INT_EQ(err->exit_code, 2);
    }
    em_error_free(err);
    em_node_free(n);
}

static void invalid(const char *yaml, const char *message) {
    invalid_with(schema, "stage 'wiki'", yaml, message);
}

static void check_defaults(void) {
    em_node *n = valid("kind: dataset\npath: x\n");
    /* absent options with a default get it, after the written ones, marked at the map */
    CHECK_INT_EQ(n->count, 5);
    CHECK_STR_EQ(n->entries[2].key, "protocol");
    CHECK_STR_EQ(n->entries[3].key, "max_length");
    CHECK_STR_EQ(n->entries[4].key, "stride");
    CHECK_STR_EQ(em_node_get_string(n, "protocol", ""), "chunked");
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "protocol")), EM_SCALAR_STRING);
    CHECK_INT_EQ(em_node_scalar_type(em_node_get(n, "max_length")), EM_SCALAR_INT);
    CHECK_INT_EQ(em_node_get_int(n, "max_length", 0), 1024);
    CHECK_INT_EQ(em_node_get(n, "stride")->mark.line, 1);
    CHECK_INT_EQ(em_node_get(n, "stride")->mark.col, 1);
    CHECK_STR_EQ(em_node_get(n, "stride")->mark.file, "t.yaml");
    em_node_free(n);

    /* written values stay; defaults inside a default are filled too */
    n = valid("kind: dataset\npath: x\nstride: 7\npush: {url: u}\nlimits: {}\n");
    CHECK_INT_EQ(em_node_get_int(n, "stride", 0), 7);
    CHECK_STR_EQ(em_node_get_string(em_node_get(n, "push"), "job", ""), "evalmesh");
    CHECK_INT_EQ(em_node_get_int(em_node_get_path(n, "push.retry"), "count", 0), 3);
    CHECK_INT_EQ(em_node_get_int(em_node_get(n, "limits"), "max", 0), 10); /* through $ref */
    CHECK(em_node_get(n, "source") == NULL);                               /* no default: absent */
    em_node_free(n);

    /* oneOf: only the matching branch's defaults are applied */
    n = valid("kind: dataset\npath: x\nsource: {kind: url, url: 'https://h'}\n");
    const em_node *src = em_node_get(n, "source");
    CHECK_INT_EQ(src->count, 3);
    CHECK(em_node_get_double(src, "timeout", 0) == 2.5);
    CHECK(em_node_get(src, "mode") == NULL);
    em_node_free(n);
    n = valid("kind: dataset\npath: x\nsource: {kind: file, path: p}\n");
    src = em_node_get(n, "source");
    CHECK_STR_EQ(em_node_get_string(src, "mode", ""), "r");
    CHECK(em_node_get(src, "timeout") == NULL);
    em_node_free(n);

    /* values every keyword accepts */
    n = valid("kind: dataset\npath: x\nname: ab_1\nratio: 0.5\nflag: false\nnothing: ~\n"
              "tags: [a, b, c]\nversion: '2.14'\neither: 3\nrequire: {nccl: '>=2.14'}\n"
              "extra: {a: 1, b: 0x10}\nafter: [a, b]\nsize: auto\nlevel: 3.0\n");
    em_node_free(n);
    n = valid("kind: dataset\npath: x\neither: s\nafter: a\nsize: 0\nversion: '12'\n");
    em_node_free(n);
}

static void check_errors(void) {
    invalid("kind: dataset\npath: x\nmax_lenght: 5\n",
            "t.yaml:3:1: stage 'wiki': unknown option 'max_lenght' (did you mean 'max_length'?)");
    invalid("kind: dataset\npath: x\nwhatever: 5\n",
            "t.yaml:3:1: stage 'wiki': unknown option 'whatever'");
    invalid("kind: dataset\npath: x\nstride: 0\n",
            "t.yaml:3:9: stage 'wiki': option 'stride' must be at least 1, got 0");
    invalid("kind: dataset\npath: x\nmax_length: 70000\n",
            "t.yaml:3:13: stage 'wiki': option 'max_length' must be at most 65536, got 70000");
    invalid("kind: dataset\npath: x\nratio: 0\n",
            "t.yaml:3:8: stage 'wiki': option 'ratio' must be greater than 0, got 0");
    invalid("kind: dataset\npath: x\nratio: .nan\n",
            "t.yaml:3:8: stage 'wiki': option 'ratio' must be greater than 0, got .nan");
    invalid("kind: dataset\npath: x\nratio: 1.0\n",
            "t.yaml:3:8: stage 'wiki': option 'ratio' must be less than 1, got 1.0");
    invalid("kind: dataset\npath: x\nprotocol: slide\n",
            "t.yaml:3:11: stage 'wiki': option 'protocol' must be one of chunked, sliding, "
            "rolling, got 'slide'");
    invalid("kind: dataset\nstride: 4\n",
            "t.yaml:1:1: stage 'wiki': missing required option 'path'");
    invalid(
        "kind: dataset\npath: x\nmax_length: abc\n",
        "t.yaml:3:13: stage 'wiki': option 'max_length' must be an integer, got a string \"abc\"");
    invalid("kind: dataset\npath: x\nmax_length: 1.5\n",
            "t.yaml:3:13: stage 'wiki': option 'max_length' must be an integer, got a number 1.5");
    invalid(
        "kind: dataset\npath: x\nmax_length: \"12\"\n",
        "t.yaml:3:13: stage 'wiki': option 'max_length' must be an integer, got a string \"12\"");
    invalid("kind: dataset\npath: x\nmax_length: 99999999999999999999\n",
            "t.yaml:3:13: stage 'wiki': option 'max_length' must fit in 64 bits, got "
            "99999999999999999999");
    invalid("kind: dataset\npath: x\nstride:\n",
            "t.yaml:3:8: stage 'wiki': option 'stride' must be an integer, got null");
    invalid("kind: model\npath: x\n",
            "t.yaml:1:7: stage 'wiki': option 'kind' must be 'dataset', got 'model'");
    invalid("kind: dataset\npath: ''\n",
            "t.yaml:2:7: stage 'wiki': option 'path' must not be empty");
    invalid("kind: dataset\npath: x\nname: Bad\n",
            "t.yaml:3:7: stage 'wiki': option 'name' must match the pattern '^[a-z][a-z0-9_]*$', "
            "got 'Bad'");
    invalid("kind: dataset\npath: x\nname: abcdefghij\n",
            "t.yaml:3:7: stage 'wiki': option 'name' must be at most 8 characters long, got "
            "'abcdefghij'");
    invalid(
        "kind: dataset\npath: x\nversion: '2.x'\n",
        "t.yaml:3:10: stage 'wiki': option 'version' must match the pattern '^\\d+(\\.\\d+)?$', "
        "got '2.x'");
    invalid("kind: dataset\npath: x\nname: |\n  two\n  lines\n",
            "t.yaml:3:7: stage 'wiki': option 'name' must be at most 8 characters long, got "
            "'two...'");
    invalid("kind: dataset\npath: x\nversion: '2'\n",
            "t.yaml:3:10: stage 'wiki': option 'version' must be at least 2 characters long, got "
            "'2'");
    invalid("kind: dataset\npath: x\nflag: yes\n",
            "t.yaml:3:7: stage 'wiki': option 'flag' must be a boolean, got a string \"yes\"");
    invalid("kind: dataset\npath: x\nnothing: 1\n",
            "t.yaml:3:10: stage 'wiki': option 'nothing' must be null, got an integer 1");
    invalid("kind: dataset\npath: x\ntags: []\n",
            "t.yaml:3:7: stage 'wiki': option 'tags' must have at least 1 item, got 0");
    invalid("kind: dataset\npath: x\ntags: [a, b, c, d]\n",
            "t.yaml:3:7: stage 'wiki': option 'tags' must have at most 3 items, got 4");
    invalid("kind: dataset\npath: x\ntags: [a, 1]\n",
            "t.yaml:3:11: stage 'wiki': option 'tags[1]' must be a string, got an integer 1");
    invalid("kind: dataset\npath: x\neither: [1]\n",
            "t.yaml:3:9: stage 'wiki': option 'either' must be a string or an integer, got a list");
    invalid(
        "kind: dataset\npath: x\nrequire: {ncl: x}\n",
        "t.yaml:3:11: stage 'wiki': unknown option 'require.ncl' (did you mean 'require.nccl'?)");
    invalid("kind: dataset\npath: x\nrequire:\n  nccl: 5\n",
            "t.yaml:4:9: stage 'wiki': option 'require.nccl' must be a string, got an integer 5");
    invalid("kind: dataset\npath: x\nrequire: [nccl]\n",
            "t.yaml:3:10: stage 'wiki': option 'require' must be a map, got a list");
    invalid("kind: dataset\npath: x\nextra: {a: x}\n",
            "t.yaml:3:12: stage 'wiki': option 'extra.a' must be an integer, got a string \"x\"");
    invalid("kind: dataset\npath: x\nlimits: {max: -1}\n",
            "t.yaml:3:15: stage 'wiki': option 'limits.max' must be at least 0, got -1");
    invalid("kind: dataset\npath: x\nlimits: {mx: 1}\n",
            "t.yaml:3:10: stage 'wiki': unknown option 'limits.mx' (did you mean 'limits.max'?)");
    invalid("kind: dataset\npath: x\npush: {job: j}\n",
            "t.yaml:3:7: stage 'wiki': missing required option 'push.url'");
    invalid("kind: dataset\npath: x\npush: {url: u, retry: {count: x}}\n",
            "t.yaml:3:31: stage 'wiki': option 'push.retry.count' must be an integer, got a string "
            "\"x\"");
    invalid("kind: dataset\npath: x\nlevel: 4\n",
            "t.yaml:3:8: stage 'wiki': option 'level' must be 3, got 4");
    invalid("kind: dataset\npath: x\nnever: 1\n",
            "t.yaml:3:8: stage 'wiki': option 'never' is not allowed here");
    /* the node itself */
    invalid("just a string\n",
            "t.yaml:1:1: stage 'wiki' must be a map, got a string \"just a string\"");
    invalid_with(schema, NULL, "kind: dataset\npath: x\nstride: 0\n",
                 "t.yaml:3:9: option 'stride' must be at least 1, got 0");
    invalid_with(schema, NULL, "kind: dataset\n", "t.yaml:1:1: missing required option 'path'");
    invalid_with(schema, NULL, "[]\n", "t.yaml:1:1: value must be a map, got a list");
    /* an unknown key is reported before a missing one (it is often the same key, mistyped) */
    invalid("kind: dataset\npaht: x\n",
            "t.yaml:2:1: stage 'wiki': unknown option 'paht' (did you mean 'path'?)");
}

static void check_alternatives(void) {
    /* the branch whose discriminator (kind) matches gives the message */
    invalid("kind: dataset\npath: x\nsource: {kind: url, url: 'ftp://h'}\n",
            "t.yaml:3:26: stage 'wiki': option 'source.url' must match the pattern '^https?://', "
            "got 'ftp://h'");
    invalid("kind: dataset\npath: x\nsource: {kind: file}\n",
            "t.yaml:3:9: stage 'wiki': missing required option 'source.path'");
    invalid("kind: dataset\npath: x\nsource: {kind: file, path: p, url: u}\n",
            "t.yaml:3:31: stage 'wiki': unknown option 'source.url'");
    /* no branch's discriminator matches: the message is about the discriminator */
    invalid("kind: dataset\npath: x\nsource: {kind: ftp}\n",
            "t.yaml:3:16: stage 'wiki': option 'source.kind' must be one of file, url, got 'ftp'");
    invalid("kind: dataset\npath: x\nsource: {path: p}\n",
            "t.yaml:3:9: stage 'wiki': missing required option 'source.kind'");
    /* no branch has the value's type: all the types are listed */
    invalid("kind: dataset\npath: x\nsource: x\n",
            "t.yaml:3:9: stage 'wiki': option 'source' must be a map, got a string \"x\"");
    invalid(
        "kind: dataset\npath: x\nafter: 5\n",
        "t.yaml:3:8: stage 'wiki': option 'after' must be a string or a list, got an integer 5");
    /* the branch that got furthest gives the message */
    invalid("kind: dataset\npath: x\nafter: [a, 5]\n",
            "t.yaml:3:12: stage 'wiki': option 'after[1]' must be a string, got an integer 5");
    invalid("kind: dataset\npath: x\nsize: -1\n",
            "t.yaml:3:7: stage 'wiki': option 'size' must be at least 0, got -1");

    em_schema *both = NULL;
    em_status err = em_schema_parse(
        "{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}", "both.json", &both);
    CHECK(err == NULL);
    em_error_free(err);
    invalid_with(
        both, "stage 'x'", "5\n",
        "t.yaml:1:1: stage 'x' matches more than one of its alternatives (1 and 2 of oneOf)");
    em_node *n = parse("2.5\n");
    err = em_schema_validate(both, n, "x");
    CHECK(err == NULL);
    em_error_free(err);
    em_node_free(n);
    em_schema_free(both);
}

static void check_schema_errors(void) {
    struct {
        const char *json;
        const char *message;
    } bad[] = {
        {"{\"type\": \"object\",\n \"properties\": {\"x\": {\"patternProperties\": {}}}}",
         "schema bad.json, at '#/properties/x': the validator does not support the keyword "
         "'patternProperties'"},
        {"{\"properties\": {\"x\": {\"$ref\": \"#/$defs/nope\"}}}",
         "schema bad.json, at '#/properties/x': '$ref' #/$defs/nope does not name a schema in this "
         "file"},
        {"{\"type\": \"map\"}", "schema bad.json, at '#': unknown type 'map'"},
        {"{\"oneOf\": []}",
         "schema bad.json, at '#/oneOf': 'oneOf' must be a non-empty list of schemas"},
        {"{\"minimum\": \"1\"}", "schema bad.json, at '#': 'minimum' must be a number"},
        {"{\"minItems\": -1}",
         "schema bad.json, at '#': 'minItems' must be a non-negative integer"},
        {"{\"pattern\": \"(\"}",
         "schema bad.json, at '#': 'pattern' is not a valid regular expression"},
        {"{\"required\": \"a\"}", "schema bad.json, at '#': 'required' must be a list of names"},
        {"{\"items\": 3}", "schema bad.json, at '#/items': a schema must be an object"},
        {"{\n  \"type\": \"object\",\n  \"x\": }", "schema bad.json:3:8: invalid JSON"},
        {"", "schema bad.json:1:1: invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        em_schema *s = NULL;
        em_status err = em_schema_parse(bad[i].json, "bad.json", &s);
        CHECK(err != NULL && s == NULL);
        CHECK_STR_EQ(err ? err->message : NULL, bad[i].message);
        CHECK_INT_EQ(err ? err->exit_code : 0, 1); /* a bad schema is a bug in evalmesh */
        em_error_free(err);
    }
    em_schema *s = NULL;
    em_status err = em_schema_load_embedded("stages/no_such_kind.schema.json", &s);
    CHECK_STR_EQ(err ? err->message : NULL,
                 "no schema 'stages/no_such_kind.schema.json' is built "
                 "into evalmesh (schemas/stages/no_such_kind.schema.json)");
    em_error_free(err);
}

/* Every schema under schemas/ is built in, and each one uses only what the validator knows. */
static void check_embedded(const char *src) {
    size_t n = 0;
    for (const em_embedded_file *f = em_embedded_files; f->path; f++, n++) {
        em_schema *s = NULL;
        em_status err = em_schema_load_embedded(f->path, &s);
        if (err) fprintf(stderr, "%s: %s\n", f->path, err->message);
        CHECK(err == NULL);
        em_error_free(err);
        em_schema_free(s);
        CHECK(em_embedded_find(f->path) == f->text);
    }
    char *path = em_xasprintf("%s/schemas/recipe.schema.json", src);
    char *text = read_text(path);
    if (text) CHECK_STR_EQ(em_embedded_find("recipe.schema.json"), text);
    printf("%zu embedded schemas load\n", n);
    free(text);
    free(path);
}

static void check_did_you_mean(void) {
    const char *const words[] = {"max_length", "stride", "protocol", "dp", "tp", "stages", "seed"};
    size_t n = sizeof words / sizeof *words;
    CHECK_STR_EQ(em_did_you_mean("max_lenght", words, n), "max_length");
    CHECK_STR_EQ(em_did_you_mean("maxlength", words, n), "max_length");
    CHECK_STR_EQ(em_did_you_mean("max", words, n), "max_length"); /* a prefix */
    CHECK_STR_EQ(em_did_you_mean("strides", words, n), "stride");
    CHECK_STR_EQ(em_did_you_mean("stagse", words, n), "stages");
    CHECK_STR_EQ(em_did_you_mean("Seed", words, n), "seed");
    CHECK_STR_EQ(em_did_you_mean("cp", words, n), "dp"); /* one edit, the first of equals */
    CHECK(em_did_you_mean("x", words, n) == NULL);
    CHECK_STR_EQ(em_did_you_mean("protocol_version", words, n), "protocol");
    CHECK(em_did_you_mean("zzz_long", words, n) == NULL);
    CHECK(em_did_you_mean("banana", words, n) == NULL);
    CHECK(em_did_you_mean("stride", words, 0) == NULL);
}

int main(void) {
    const char *src = getenv("EVALMESH_SOURCE_DIR");
    if (!src) TEST_SKIP("EVALMESH_SOURCE_DIR is not set (run through ctest)");
    char *path = em_xasprintf("%s/tests/recipe/files/test.schema.json", src);
    char *text = read_text(path);
    CHECK(text != NULL);
    em_status err = em_schema_parse(text ? text : "", "test.schema.json", &schema);
    if (err) fprintf(stderr, "%s\n", err->message);
    CHECK(err == NULL);
    em_error_free(err);
    free(text);
    free(path);
    if (!schema) return test_finish();
    check_defaults();
    check_errors();
    check_alternatives();
    em_schema_free(schema);
    check_schema_errors();
    check_embedded(src);
    check_did_you_mean();
    return test_finish();
}
