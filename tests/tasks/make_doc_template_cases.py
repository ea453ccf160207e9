#!/usr/bin/env python3
"""Writes tests/tasks/data/doc_template_cases.json: random templates of doc_template's Jinja
subset over random documents, each with what jinja2 renders under lm-eval's Environment
(StrictUndefined, keep_trailing_newline) or "error" where jinja2 raises or where the value is one
evalmesh refuses to render (a list or an object). tasks_doc_template renders every case with
doc_template.c and compares byte for byte.

Run it with jinja2 (lm-eval's environment: pip install lm-eval==0.4.13, or jinja2 alone):
    python3 tests/tasks/make_doc_template_cases.py"""
import json
import os
import random

from jinja2 import BaseLoader, Environment, StrictUndefined

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = Environment(loader=BaseLoader, undefined=StrictUndefined, keep_trailing_newline=True)
# Python's whitespace beyond ASCII, and characters that look like it but are not
SPACES = [" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x85", "\xa0", "\u1680",
          "\u2003", "\u200a", "\u2028", "\u202f", "\u205f", "\u3000"]
NOT_SPACES = ["\u200b", "\ufeff", "\u180e", "é", "日本", "x", "ab", "-", ",", "'", '"', "{", "}"]


def rand_text(rnd, n):
    return "".join(rnd.choice(SPACES + NOT_SPACES) for _ in range(n))


def rand_doc(rnd):
    words = [rand_text(rnd, rnd.randint(1, 3)).strip() or "w" for _ in range(rnd.randint(1, 5))]
    return {
        "s": rand_text(rnd, rnd.randint(0, 8)),
        "t": " ".join(words),
        "L": [rand_text(rnd, rnd.randint(0, 3)) for _ in range(rnd.randint(1, 4))],
        "D": {"text": words, "label": [chr(65 + i) for i in range(len(words))]},
        "k": rnd.choice(["A", "B", "C", "Z"]),
        "n": rnd.randint(-3, 5),
        "b": rnd.choice([True, False]),
        "z": None,
    }


def literal(rnd):
    s = rnd.choice(["", " ", "x", "ab", " é ", ", ", "-", "\\n", "\\t", "\\'", '\\"'])
    return rnd.choice(["'%s'" % s, '"%s"' % s.replace('\\"', '\\\'')])


def string_expr(rnd, depth):
    if depth == 0:
        return rnd.choice(["s", "t", "L[0]", "L[-1]", "D.text[0]", "D['label'][-1]", "k",
                           literal(rnd)])
    e = string_expr(rnd, depth - 1)
    i = rnd.randint(-4, 4)
    forms = [
        "%s.strip()", "%s.lstrip()", "%s.rstrip()", "%s.strip(' x')", "%s.lstrip('ab')",
        "%s | trim", "%s | trim('x ')", "(%s)[1:]", "(%s)[:-1]", "(%s)[" + str(i) + ":]",
        "(%s)[:" + str(i) + "]", "(%s)[" + str(i) + "]", "%s.replace('x', 'yz')",
        "%s | replace(' ', '_')", "%s.split() | join('|')", "%s.split(' ')[" + str(i) + "]",
        "%s.split('x') | join(',')", "%s.split() | first", "%s.split() | last",
        "%s + " + literal(rnd), literal(rnd) + " + %s", "%s | first", "%s | last",
        "(%s.split(' ')[:-1] | join(' '))",
    ]
    return rnd.choice(forms) % e


def any_expr(rnd):
    r = rnd.random()
    if r < 0.7:
        return string_expr(rnd, rnd.randint(0, 3))
    return rnd.choice([
        "n", "n + 1", "-n", "b", "z", "true", "none", "L | length", "t | length",
        "D.label.index(k)", "D.label.index('A')", "L | join(', ')", "[s, t] | join('/')",
        "(L + [k]) | length", "D.text[n]", "L[n]", "s.split() | length",
        "L", "D", "D.text",  # lists and objects: evalmesh refuses to render them
        "missing", "D.missing",  # StrictUndefined
    ])


def render(template, doc):
    try:
        # the values themselves, to refuse what evalmesh does not render (no literal holds "}}")
        for part in template.split("{{")[1:]:
            value = ENV.compile_expression(part.split("}}")[0])(**doc)
            if isinstance(value, (list, dict)):
                return None
        return ENV.from_string(template).render(**doc)
    except Exception:
        return None


def main():
    rnd = random.Random(2025)
    cases = []
    for _ in range(600):
        doc = rand_doc(rnd)
        parts = [rnd.choice(["", "Q: ", "\n", " -- ", "é\r\n"]) for _ in range(3)]
        exprs = ["{{ %s }}" % any_expr(rnd) for _ in range(rnd.randint(1, 2))]
        template = parts[0] + exprs[0] + parts[1] + (exprs[1] if len(exprs) > 1 else "") + parts[2]
        cases.append({"template": template, "doc": doc, "rendered": render(template, doc)})
    with open(os.path.join(HERE, "data", "doc_template_cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{len(cases)} cases, {sum(c['rendered'] is None for c in cases)} errors")


if __name__ == "__main__":
    main()
