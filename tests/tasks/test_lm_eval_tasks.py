#!/usr/bin/env python3
"""lm-eval task YAMLs loaded by evalmesh (tests/tasks/lm_eval_task_dump, a driver over
em_lm_eval_task_load).
  contexts:  every case of data/lm_eval/expected.json (what lm-eval 0.4.13 itself built, see
             make_lm_eval_contexts.py) gives the same contexts, continuations and gold index
             byte for byte; --limit keeps the first documents' few-shot draws. A generate_until
             case also gives lm-eval's until and max_gen_toks, and for each of its responses
             the filtered answer and exact_match lm-eval's own filters and process_results gave,
             and per round of responses exact_match with its mean_stderr, keyed by the filter.
  bad_input: each YAML of data/lm_eval_bad exits 2 with its message, naming where."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GOOD = os.path.join("tests", "tasks", "data", "lm_eval")
BAD = os.path.join("tests", "tasks", "data", "lm_eval_bad")


def dump(driver, yaml, *args):
    return subprocess.run([driver, yaml, *map(str, args)], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(HERE)))


def check_contexts(driver):
    with open(os.path.join(HERE, "data", "lm_eval", "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    failures = 0
    compared = 0
    for case in expected["cases"]:
        shots = -1 if case["num_fewshot"] is None else case["num_fewshot"]
        generative = "responses" in case["examples"][0]
        with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as responses:
            json.dump([[r[0] for r in ex["responses"]] for ex in case["examples"]]
                      if generative else [], responses)
            responses.flush()
            run = dump(driver, os.path.join(GOOD, case["task"] + ".yaml"), shots, 0,
                       *([responses.name] if generative else []))
        if run.returncode != 0:
            print(f"{case['task']} {shots}: exit {run.returncode}: {run.stderr}")
            failures += 1
            continue
        task = json.loads(run.stdout)
        got = task["examples"]
        want = case["examples"]
        for w in want if generative else []:
            for key in ("until", "max_gen_toks"):
                compared += 1
                if task[key] != w[key]:
                    print(f"{case['task']} doc {w['doc']}: {key}: evalmesh {task[key]!r}, "
                          f"lm-eval {w[key]!r}")
                    failures += 1
        for g, w in zip(got, want) if generative else []:
            # the samples-file line of the first response: lm-eval's request, response, answer
            sample = g["sample"]
            response, answer, score = w["responses"][0]
            compared += 1
            if (sample["doc_id"], sample["target"], sample["arguments"],
                    sample["resps"], sample["filtered_resps"], sample["exact_match"]) != (
                    w["doc"], w["continuations"][0],
                    [[w["context"], {"until": w["until"], "max_gen_toks": w["max_gen_toks"]}]],
                    [[response]], [answer], score):
                print(f"{case['task']} doc {w['doc']}: samples line {sample!r}")
                failures += 1
            for (response, answer, score), (got_answer, got_score) in zip(w["responses"],
                                                                          g["scored"]):
                compared += 1
                if (got_answer, got_score) != (answer, score):
                    print(f"{case['task']} doc {w['doc']}: response {response!r}: evalmesh "
                          f"{got_answer!r} {got_score}, lm-eval {answer!r} {score}")
                    failures += 1
        for k, w in enumerate(case.get("results", [])):
            (filtered,) = [key for key in w if "_stderr" not in key]
            entry = task["results"][k]["results"][case["task"]]
            for key, value in w.items():
                compared += 1
                ok = key in entry and (entry[key] == value if key == filtered
                                       else abs(entry[key] - value) <= 1e-12)
                if not ok:
                    print(f"{case['task']} round {k}: {key}: evalmesh {entry.get(key)!r}, "
                          f"lm-eval {value!r}")
                    failures += 1
        if len(got) != len(want):
            print(f"{case['task']} {shots}: {len(got)} examples, lm-eval has {len(want)}")
            failures += 1
        for g, w in zip(got, want):
            for key in ("doc", "context", "continuations", "gold"):
                compared += 1
                if g[key] != w[key]:
                    print(f"{case['task']} shots={shots} doc {w['doc']}: {key}\n"
                          f"  evalmesh {g[key]!r}\n  lm-eval  {w[key]!r}")
                    failures += 1
    # --limit: the first documents, with the few-shot examples of a whole run
    qa3 = next(c for c in expected["cases"] if c["task"] == "qa" and c["num_fewshot"] == 3)
    run = dump(driver, os.path.join(GOOD, "qa.yaml"), 3, 4)
    got = json.loads(run.stdout)["examples"]
    compared += 1
    if [g["context"] for g in got] != [w["context"] for w in qa3["examples"][:4]]:
        print("qa --limit 4: the contexts differ from the first 4 of a whole run")
        failures += 1
    print(f"{compared} fields compared, {failures} differ")
    return failures


BAD_CASES = {
    "malformed": "malformed.yaml:5:1: found unexpected end of stream (while scanning a quoted "
                 "scalar at {dir}/malformed.yaml:3:14)",
    "broken_line": "broken_line.yaml:5:11: split 'test': {dir}/broken.jsonl:3: not a JSON object "
                   "on one line (JSON Lines: one document a line)",
    "target_range": "docs.jsonl:2: document 1: doc_to_target ({dir}/target_range.yaml:10:16): "
                    "target 5 is out of range of the 2 choices",
    "target_text": "docs.jsonl:1: document 0: doc_to_target ({dir}/target_text.yaml:10:16): "
                   "target \"one\" is not one of the choices",
    "missing_field": "docs.jsonl:1: document 0: doc_to_text ({dir}/missing_field.yaml:8:15): "
                     "the document has no field 'question'",
    "jinja_block": "jinja_block.yaml:8:15: doc_to_text: '{{%' blocks are not supported "
                   "(evalmesh renders a subset of Jinja: docs/tasks.md)",
    "jinja_filter": "jinja_filter.yaml:8:25: doc_to_text: the filter 'upper' is not supported "
                    "(evalmesh renders a subset of Jinja: docs/tasks.md)",
    "unknown_metric": "unknown_metric.yaml:13:13: lm-eval task: unsupported metric 'f1' for "
                      "output_type multiple_choice (evalmesh: acc, acc_norm, acc_mutual_info)",
    "misspelled_key": "misspelled_key.yaml:8:1: lm-eval task: unknown key 'doc_to_txt' (did you "
                      "mean 'doc_to_text'?)",
    "process_docs": "process_docs.yaml:11:1: lm-eval task: 'process_docs' is not supported by "
                    "evalmesh (docs/tasks.md)",
    "yaml11_choice": "yaml11_choice.yaml:9:17: lm-eval task: doc_to_choice: every choice must be "
                     "a string (quote it: lm-eval reads task YAMLs as YAML 1.1)",
    "float_column": "floats.jsonl:1: document 0: doc_to_text ({dir}/float_column.yaml:8:15): "
                    "rendering a number Python holds as a float is outside evalmesh's subset (it "
                    "renders a string, an integer, a bool or null)",
    "dict_method": "dict_method.yaml:9:27: doc_to_choice: '.values' is a Python dict method in "
                   "Jinja, not the field: write ['values'] (evalmesh renders a subset of Jinja: "
                   "docs/tasks.md)",
    "too_many_shots": "docs.jsonl:1: document 0: 3-shot needs 4 few-shot documents (lm-eval draws "
                      "one more, to leave the document out), and split 'test' has 3",
    "octal_target": "octal_target.yaml:10:16: lm-eval task: doc_to_target: write the index in "
                    "plain decimal (lm-eval reads task YAMLs as YAML 1.1)",
    "cycle_a": "cycle_a.yaml:1:10: include 'cycle_b.yaml': {dir}/cycle_b.yaml:1:10: lm-eval task: "
               "include cycle: '{dir}/cycle_a.yaml' includes itself",
    "included_error": "jinja_filter.yaml:8:14: doc_to_text: the filter 'upper' is not supported "
                      "at character 11 of the template (evalmesh renders a subset of Jinja: "
                      "docs/tasks.md)",
    "generate": "generate.yaml:12:14: lm-eval task: do_sample: true is not supported: evalmesh "
                "decodes greedily (do_sample: false)",
    "gen_temperature": "gen_temperature.yaml:11:16: lm-eval task: temperature 0.7 is not "
                       "supported: evalmesh decodes greedily (temperature 0)",
    "gen_unknown_filter": "gen_unknown_filter.yaml:13:19: lm-eval task: unsupported filter "
                          "'regexp' (did you mean 'regex'?) (evalmesh: regex, remove_whitespace, "
                          "lowercase, uppercase, take_first)",
    "gen_after_take_first": "gen_after_take_first.yaml:14:9: lm-eval task: a filter after "
                            "take_first is not supported (lm-eval would run it on the characters "
                            "of the text)",
    "gen_lazy_regex": "gen_lazy_regex.yaml:14:24: lm-eval task: regex_pattern: the pattern 'The "
                      "answer is (\\d+?)' at character 19: lazy (*? +? ?? {{m,n}}?) and "
                      "possessive quantifiers are not supported (docs/tasks.md lists the Python "
                      "regular expressions evalmesh runs)",
    "gen_two_filters": "gen_two_filters.yaml:14:5: lm-eval task: filter_list has 2 entries; "
                       "evalmesh scores one filter pipeline per task",
    "gen_metric_kwarg": "gen_metric_kwarg.yaml:13:5: lm-eval task: metric 'exact_match': "
                        "'ignore_spaces' is not supported (aggregation: mean only; ignore_case, "
                        "ignore_punctuation, ignore_numbers, regexes_to_ignore)",
    "gen_ignore_regex": "gen_ignore_regex.yaml:13:9: lm-eval task: regexes_to_ignore: the pattern "
                        "'\\bthe\\b' at character 1: the anchors \\b \\B \\A \\Z are not "
                        "supported (docs/tasks.md lists the Python regular expressions evalmesh "
                        "runs)",
    "gen_kwargs_mc": "gen_kwargs_mc.yaml:11:1: lm-eval task: 'generation_kwargs' is for "
                     "output_type generate_until",
}


def check_bad_input(driver):
    failures = 0
    for name, message in BAD_CASES.items():
        run = dump(driver, os.path.join(BAD, name + ".yaml"))
        want = os.path.join(BAD, message.format(dir=BAD))
        if run.returncode != 2 or run.stdout or run.stderr.strip() != want:
            print(f"{name}: exit {run.returncode}, stdout {len(run.stdout)} bytes\n"
                  f"  got  {run.stderr.strip()}\n  want {want}")
            failures += 1
    print(f"{len(BAD_CASES)} bad inputs, {failures} failed")
    return failures


def main():
    driver, mode = sys.argv[1], sys.argv[2]
    failures = check_contexts(driver) if mode == "contexts" else check_bad_input(driver)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
