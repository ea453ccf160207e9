"""Writes generation_scoring_expected.json: what lm-evaluation-harness 0.4.13's own filters
(lm_eval.filters: regex, remove_whitespace, lowercase, uppercase, take_first, through
build_filter_ensemble as a task's filter_list builds them) and its exact_match
(lm_eval.api.metrics.exact_match_hf_evaluate, the metric generate_until tasks use) give on a set
of generated strings, and what BIG-bench 1.0.0's postprocess_output and exact_str_match_fn give
on texts made from real generative tasks' targets, for tests/tasks/test_generation_scoring.c.
BIG-bench's functions are copied below from the sdist (bigbench/models/model_utils.py,
bigbench/api/task_metrics.py; json_task.py imports tensorflow, so its logic is copied).
    /work/venvs/lmeval/bin/python tests/tasks/make_generation_scoring.py BENCHMARK_TASKS_DIR \
        > tests/tasks/generation_scoring_expected.json
(BENCHMARK_TASKS_DIR: what tools/fetch-bigbench prints.)"""
import json
import os
import random
import re
import sys

from lm_eval.api.metrics import exact_match_hf_evaluate
from lm_eval.api.instance import Instance
from lm_eval.filters import build_filter_ensemble


# ---- bigbench/models/model_utils.py (bigbench 1.0.0), copied ----------------------------------
def postprocess_output(text, max_length, stop_string, output_regex):
    if isinstance(text, list):
        return [postprocess_output(mo, max_length, stop_string, output_regex) for mo in text]
    if not isinstance(text, str):
        text = str(text, "utf-8")
    if max_length:
        text = text[:max_length]
    if stop_string:
        index = text.find(stop_string)
        if index > 0:
            text = text[: index + len(stop_string)]
    if output_regex:
        _text = text
        text = next(iter(re.findall(output_regex, text)), "")
        assert not type(text) is tuple
    return text


# ---- bigbench/api/task_metrics.py exact_str_match_fn, copied ----------------------------------
def exact_str_match_fn(targets, responses):
    count = 0
    for target, response in zip(targets, responses):
        if not isinstance(target, list):
            target = [target]
        if response in target:
            count += 1
    return {"exact_str_match": count / len(targets)}


_DEFAULT_REGEX = r"[^\.\?\!\;\n]+"  # json_task.py
MAX_LENGTH = 256  # huggingface_models.py BIGBenchHFModel's max_length

PIECES = ["The answer is ", "#### ", "42", "-7", "1,234.5", "3.", ".", ",", "\n", "\n\n", " ",
          "  ", "\t", "A", "(B)", "c", "D.", "Answer: ", "= ", "x", "yes", "No", "é", "Σ",
          "ÉCOLE", "\u2003", "\u00a0", "Ж", "$", "!", "?", ";", "abc_def", "12", "0", "Q: ", "_",
          "'quoted'", "[", "]"]


def random_texts(rnd, count):
    texts = []
    for _ in range(count):
        texts.append("".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 9))))
    return texts


FILTERS = [
    [{"function": "regex"}, {"function": "take_first"}],
    [{"function": "regex", "regex_pattern": r"The answer is (\-?[0-9\.\,]+)."},
     {"function": "take_first"}],
    [{"function": "regex", "regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)", "group_select": -1},
     {"function": "take_first"}],
    [{"function": "regex", "regex_pattern": r"\(?([A-D])\)?", "fallback": "none"}],
    [{"function": "regex", "regex_pattern": r"[A-D]", "group_select": 0}],
    [{"function": "regex", "regex_pattern": r"(?:Answer:|=)\s*(\d+)"}, {"function": "take_first"}],
    [{"function": "regex", "regex_pattern": r"\w+", "group_select": 0, "fallback": ""}],
    [{"function": "regex", "regex_pattern": r"\d*", "group_select": -1}],
    [{"function": "regex", "regex_pattern": r"[^\.\?\!\;\n]+"}],
    [{"function": "regex", "regex_pattern": r"\S+\s\S+", "fallback": "[none]"}],
    [{"function": "regex", "regex_pattern": r"^\s*([a-z]+)", "fallback": "-"}],
    [{"function": "regex", "regex_pattern": r"[\]\[\-_]+"}],
    [{"function": "regex", "regex_pattern": r"(\d+)[.]{0,1}$"}],
    [{"function": "regex", "regex_pattern": r"{x}|x{2,}|x{,1}y"}],
    [{"function": "remove_whitespace"}, {"function": "take_first"}],
    [{"function": "lowercase"}, {"function": "remove_whitespace"}],
    [{"function": "uppercase"}],
    [{"function": "take_first"}],
]

EXACT_MATCH = [
    {},
    {"ignore_case": True},
    {"ignore_punctuation": True},
    {"ignore_numbers": True},
    {"ignore_case": True, "ignore_punctuation": True},
    {"regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"]},
    {"regexes_to_ignore": ["\\s+", "^the "], "ignore_case": True},
    {"regexes_to_ignore": ["[aeiou]"], "ignore_case": True, "ignore_punctuation": True,
     "ignore_numbers": True},
]


def run_filter(steps, texts):
    ensemble = build_filter_ensemble("f", [[s["function"], {k: v for k, v in s.items()
                                                              if k != "function"}]
                                           for s in steps])
    instances = [Instance(request_type="generate_until", doc={}, arguments=("", {}), idx=0)
                 for _ in texts]
    for inst, text in zip(instances, texts):
        inst.resps = [text]
    ensemble.apply(instances)
    out = []
    for inst in instances:
        answer = inst.filtered_resps["f"]
        out.append(answer[0] if isinstance(answer, list) else answer)
    return out


def bigbench_cases(tasks_dir, rnd):
    names = ["ascii_word_recognition", "chinese_remainder_theorem",
             "international_phonetic_alphabet_transliterate", "operators", "physics_questions",
             "simple_arithmetic_json", "simple_text_editing", "linguistics_puzzles",
             "word_unscrambling", "auto_debugging", "hindi_question_answering",
             "simple_arithmetic_multiple_targets_json", "object_counting"]
    result = []
    for name in names:
        with open(os.path.join(tasks_dir, name, "task.json"), encoding="utf-8") as f:
            data = json.load(f)
        output_regex = data.get("output_regex")
        stop_string = data.get("stop_string")
        if output_regex is None and stop_string is None:
            output_regex = _DEFAULT_REGEX
        cases = []
        for ex in rnd.sample(data["examples"], min(12, len(data["examples"]))):
            targets = ex["target"] if isinstance(ex["target"], list) else [ex["target"]]
            t = str(targets[0])
            for text in [t, " " + t, t + "\n", t + ".\nQ: next", "\n" + t, t + " and more",
                         t.upper(), t[:-1], t + "x" * 300, rnd.choice(PIECES) + t]:
                processed = postprocess_output(text, MAX_LENGTH, stop_string, output_regex)
                score = exact_str_match_fn([ex["target"]], [processed])["exact_str_match"]
                cases.append([text, [str(x) for x in targets], processed, score])
        result.append({"task": name, "output_regex": output_regex, "stop_string": stop_string,
                       "max_length": MAX_LENGTH, "cases": cases})
    return result


def main():
    rnd = random.Random(22)
    texts = random_texts(rnd, 300)
    out = {"filters": [], "exact_match": []}
    for steps in FILTERS:
        out["filters"].append({"steps": steps,
                               "cases": [list(p) for p in zip(texts, run_filter(steps, texts))]})
    refs = random_texts(rnd, 100)
    pairs = [(p, p) for p in refs[:20]] + [(p, r) for p, r in zip(texts, refs)]
    pairs += [(p, p.upper()) for p in refs[20:40]] + [(p, p.replace(",", "")) for p in refs[40:60]]
    for options in EXACT_MATCH:
        cases = []
        for p, r in pairs:
            score = exact_match_hf_evaluate(predictions=[p], references=[r], **options)
            cases.append([p, r, float(score["exact_match"])])
        out["exact_match"].append({"options": options, "cases": cases})
    out["bigbench"] = bigbench_cases(sys.argv[1], rnd)
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


main()
