/* The Jinja templates of lm-evaluation-harness task YAMLs (doc_to_text, doc_to_target,
 * doc_to_choice, description), a documented subset rendered over one document (a JSON object)
 * exactly as lm-eval 0.4.13 renders it (jinja2 with StrictUndefined and keep_trailing_newline):
 *
 *   text                    literal text; "\r\n" and "\r" become "\n" as Jinja's lexer does
 *   {{ expr }}              the value of expr, as Python's str() writes it: a string as is, an
 *                           integer in decimal, true/false as True/False, null as None
 *   expr:
 *     name                  a field of the document (question)
 *     'text' "text" 12 -1   string and integer literals; true/false/none (any case Jinja takes)
 *     [a, b]                a list
 *     e.name  e["name"]     a field of an object (choices.text, answers["text"])
 *     e[i]  e[a:b]          an item or a slice of a list or string (Python's rules; by code point)
 *     a + b                 concatenation of strings or lists, sum of integers
 *     (e)
 *     e.strip([chars]) e.lstrip([chars]) e.rstrip([chars])   Python's, whitespace as str.isspace
 *     e.split([sep])  e.replace(old, new)  e.index(x)         on strings (index: on lists)
 *     e | trim  e | join(sep)  e | length  e | first  e | last  e | replace(old, new)
 *
 * Anything else ({% %} blocks, {# #} comments, whitespace control {{- -}}, other filters,
 * methods and operators, rendering a list, an object or a non-integer number) is an error at
 * the template's place (the column inside it when the template stands verbatim in its file).
 * A template naming a field the document lacks is an error naming the field, the document and
 * its data file (jinja2's StrictUndefined raises there too). */
#ifndef EVALMESH_TASKS_DOC_TEMPLATE_H
#define EVALMESH_TASKS_DOC_TEMPLATE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

typedef struct em_doc_template em_doc_template;

/* Where a document came from, for the errors of rendering it. */
typedef struct em_doc_source {
    const char *data_file; /* the JSON Lines file */
    int line;              /* its line there (1-based) */
    size_t doc_index;      /* its place among the split's documents (0-based) */
} em_doc_source;

/* A JSON number that Python holds as a float (its text, or that of the same field in another
 * document of the data, has a fraction or an exponent, so datasets types the column float)
 * carries this bit in its cJSON type: rendering it or taking it as an index is refused, since
 * Python writes 1.0 where cJSON keeps 1. */
#define EM_JSON_FLOAT 0x1000

/* Parses `text`, the value of the YAML key `what` at `mark`. `verbatim`: the text stands as is
 * in its file from `mark` on (no escapes, one line), so an error's column is the column in the
 * file; otherwise errors are at `mark` and say the character inside the template. Exit 2. */
em_status em_doc_template_parse(const char *text, const char *what, em_mark mark, bool verbatim,
                                em_doc_template **out);
void em_doc_template_free(em_doc_template *tmpl);

/* Whether the template is one {{ expr }} and nothing else (doc_to_choice's list form). */
bool em_doc_template_is_expression(const em_doc_template *tmpl);

/* The template rendered over doc (a JSON object); the caller frees *out. Exit 2 for a missing
 * field or a value outside the subset, naming the document (source) and the template. */
em_status em_doc_template_render(const em_doc_template *tmpl, const cJSON *doc,
                                 const em_doc_source *source, char **out);
/* The value of a template that is one expression (em_doc_template_is_expression); the caller
 * frees *out with cJSON_Delete. */
em_status em_doc_template_evaluate(const em_doc_template *tmpl, const cJSON *doc,
                                   const em_doc_source *source, cJSON **out);

/* Python's str.isspace for one code point. */
bool em_python_isspace(unsigned cp);
/* str(value) as Python writes a JSON scalar (string, integer, bool, null) into out; false for a
 * list, an object, an EM_JSON_FLOAT number or one beyond 2^53. */
bool em_python_str(const cJSON *value, char **out);

#endif
