/* doc_template: the Jinja subset rendered over one document (each expected string is what
 * jinja2 3 renders for the same template and document under lm-eval's Environment), and the
 * errors: unsupported syntax at its column, a missing field naming the document. With a path
 * argument, also every case of data/doc_template_cases.json (random templates and documents
 * rendered by jinja2, make_doc_template_cases.py): the same bytes, or an error where jinja2
 * raises or gives a list or an object. */
#include <cjson/cJSON.h>

#include "util/regular_file.h"

#include "stages/tasks/doc_template.h"
#include "test.h"

static const char *const doc_text =
    "{\"question\": \"  Why?\\t\", \"choices\": {\"text\": [\"a b\", \"c\"], \"label\": [\"A\", "
    "\"B\"]}, \"answerKey\": \"B\", \"n\": 3, \"ok\": true, \"none\": null, "
    "\"sentence\": \"the cat sat\", \"answers\": {\"text\": [\"x\"]}}";

static const em_doc_source source = {"data.jsonl", 7, 6};

/* Renders tmpl over the document; NULL on error (the message in *message). */
static char *render(const char *tmpl, char **message) {
    cJSON *doc = cJSON_Parse(doc_text);
    em_doc_template *t;
    char *out = NULL;
    em_mark mark = {em_intern("task.yaml"), 4, 14};
    em_status err = em_doc_template_parse(tmpl, "doc_to_text", mark, true, &t);
    if (!err) {
        err = em_doc_template_render(t, doc, &source, &out);
        em_doc_template_free(t);
    }
    *message = NULL;
    if (err) {
        *message = em_xstrdup(err->message);
        CHECK_INT_EQ(err->exit_code, EM_EXIT_BAD_INPUT);
        em_error_free(err);
    }
    cJSON_Delete(doc);
    return out;
}

static void check_render(const char *tmpl, const char *expected) {
    char *message;
    char *out = render(tmpl, &message);
    if (message) fprintf(stderr, "%s: %s\n", tmpl, message);
    CHECK_STR_EQ(out, expected);
    free(out);
    free(message);
}

static void check_error(const char *tmpl, const char *expected) {
    char *message;
    char *out = render(tmpl, &message);
    CHECK(out == NULL);
    CHECK_STR_EQ(message, expected);
    free(out);
    free(message);
}

/* Every case of the file: the same rendering as jinja2, or an error where it has none. */
static void check_cases(const char *path) {
    char *text;
    em_status err = em_read_regular_file(path, EM_TEXT_MAX_BYTES, "cases", &text, NULL);
    CHECK(err == NULL);
    if (err) return;
    cJSON *cases = cJSON_Parse(text);
    free(text);
    CHECK(cJSON_GetArraySize(cases) == 600);
    int i = 0, rendered = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next, i++) {
        const char *tmpl = cJSON_GetObjectItem(c, "template")->valuestring;
        const cJSON *want = cJSON_GetObjectItem(c, "rendered");
        em_doc_template *t;
        em_mark mark = {em_intern("cases.json"), i + 1, 1};
        char *out = NULL;
        em_doc_source where = {"cases.json", i + 1, (size_t)i};
        err = em_doc_template_parse(tmpl, "case", mark, false, &t);
        if (!err) {
            err = em_doc_template_render(t, cJSON_GetObjectItem(c, "doc"), &where, &out);
            em_doc_template_free(t);
        }
        if (cJSON_IsString(want)) {
            rendered++;
            if (err) fprintf(stderr, "case %d %s: %s\n", i, tmpl, err->message);
            CHECK_STR_EQ(out, want->valuestring);
        } else {
            if (!err)
                fprintf(stderr, "case %d %s: rendered \"%s\", jinja2 has none\n", i, tmpl, out);
            CHECK(err != NULL);
        }
        em_error_free(err);
        free(out);
    }
    printf("%d cases, %d rendered by jinja2\n", i, rendered);
    cJSON_Delete(cases);
}

int main(int argc, char **argv) {
    if (argc > 1) check_cases(argv[1]);
    check_render("Question: {{question}}", "Question:   Why?\t");
    check_render("{{question.strip()}}|{{ question | trim }}|{{question.lstrip()}}.",
                 "Why?|Why?|Why?\t.");
    check_render("{{choices.text[0]}} {{choices['label'][-1]}} {{answers[\"text\"][0]}}",
                 "a b B x");
    check_render("{{choices.label.index(answerKey)}}", "1");
    check_render("{{sentence.split(' ')[:-1]|join(' ')}}|{{' '+sentence.split(' ')[-1]}}",
                 "the cat| sat");
    check_render("{{n}} {{n + 1}} {{ok}} {{none}} {{choices.text|length}}", "3 4 True None 2");
    check_render("{{sentence.replace('cat', 'dog')}} {{sentence[4:7]}} {{sentence.split()|last}}",
                 "the dog sat cat sat");
    check_render("a\r\nb\rc{{'}}'}}", "a\nb\nc}}");
    check_render("no braces { here }", "no braces { here }");

    check_error("{% if ok %}x{% endif %}",
                "task.yaml:4:14: doc_to_text: '{%' blocks are not supported (evalmesh renders a "
                "subset of Jinja: docs/tasks.md)");
    check_error("Q: {{ question | upper }}",
                "task.yaml:4:31: doc_to_text: the filter 'upper' is not supported (evalmesh "
                "renders a subset of Jinja: docs/tasks.md)");
    check_error("{{ question.lower() }}",
                "task.yaml:4:26: doc_to_text: the method 'lower' is not supported (evalmesh "
                "renders a subset of Jinja: docs/tasks.md)");
    check_error("{{ question.split(' ', 1) }}",
                "task.yaml:4:26: doc_to_text: split takes 0 to 1 arguments, not 2 (evalmesh "
                "renders a subset of Jinja: docs/tasks.md)");
    check_error("Q: {{ question * 2 }}",
                "task.yaml:4:29: doc_to_text: unsupported operator or syntax '*' (evalmesh "
                "renders a subset of Jinja: docs/tasks.md)");
    check_error("Q: {{- question }}",
                "task.yaml:4:17: doc_to_text: whitespace control ('{{-') is not supported "
                "(evalmesh renders a subset of Jinja: docs/tasks.md)");
    check_error("{{ question", "task.yaml:4:14: doc_to_text: '{{' without its '}}' (evalmesh "
                               "renders a subset of Jinja: docs/tasks.md)");
    check_error("Q: {{questions}}", "data.jsonl:7: document 6: doc_to_text (task.yaml:4:14): the "
                                    "document has no field 'questions'");
    check_error("{{choices.texts}}", "data.jsonl:7: document 6: doc_to_text (task.yaml:4:14): "
                                     "the field 'choices.texts' is missing");
    check_error("{{choices.text}}", "data.jsonl:7: document 6: doc_to_text (task.yaml:4:14): "
                                    "rendering a list is outside evalmesh's subset (it renders a "
                                    "string, an integer, a bool or null)");
    check_error("{{choices.items}}",
                "task.yaml:4:24: doc_to_text: '.items' is a Python dict method in Jinja, not the "
                "field: write ['items'] (evalmesh renders a subset of Jinja: docs/tasks.md)");
    check_error("{{choices.label.index('Z')}}",
                "data.jsonl:7: document 6: doc_to_text (task.yaml:4:14): index(): \"Z\" is not "
                "in the list");
    for (unsigned cp = 0; cp < 0x110000; cp++)
        if (em_python_isspace(cp)) CHECK(cp < 0x3001);
    return test_finish();
}
