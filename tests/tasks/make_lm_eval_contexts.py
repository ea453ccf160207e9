#!/usr/bin/env python3
"""Writes tests/tasks/data/lm_eval/expected.json: the contexts, continuations and gold index that
lm-evaluation-harness 0.4.13 itself builds for the task YAMLs of tests/tasks/data/lm_eval, one
entry per case (task, num_fewshot), as simple_evaluate would (the task's num_fewshot overridden
unless its YAML sets 0, fewshot seed 1234, rank 0 of 1). tasks_lm_eval_contexts compares
evalmesh's em_lm_eval_task_load with it byte for byte.

Run it in a throwaway environment with lm-eval (no torch needed):
    python3 -m venv /tmp/lmeval && /tmp/lmeval/bin/pip install lm-eval==0.4.13
    /tmp/lmeval/bin/python tests/tasks/make_lm_eval_contexts.py
datasets resolves data_files against the working directory, so it runs in the data folder."""
import json
import os
import sys
from importlib.metadata import version

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "lm_eval")
# (task, num_fewshot given as --num_fewshot would be, or None for the YAML's)
CASES = [
    ("qa", None),
    ("qa", 3),
    ("pairs", None),
    ("pairs", 0),
    ("spaced", None),
    ("lambada_like", None),
    ("lambada_like", 2),
    ("arith", None),
    ("arith", 1),
    ("qa_included", None),
    ("pairs_first_n", None),
    ("gsm_like", None),
    ("gsm_like", 0),
    ("gen_choice", None),
    ("gen_defaults", None),
]


def responses_for(target):
    """Generated texts to score for a document whose target is `target`: the target itself, with
    spaces and case changed, with a GSM8K-style "#### " answer, and ones that miss."""
    last = target.split()[-1] if target.split() else target
    return [target, " " + target + "\n", "So the answer is #### " + last, "#### " + last + ".",
            target.upper(), "no answer", "NONE", "It is -1, or 1,234.", "#### $" + last,
            "\u00a0" + last + "\u2003"]


def score_generations(task, docs, examples):
    """lm-eval's own filters (apply_filters) and process_results on responses_for each document:
    [response, filtered answer, exact_match] per response; per round (every document's k-th
    response) the task's exact_match with lm-eval's mean and mean_stderr, keyed as its results
    are ("exact_match,<filter>")."""
    from lm_eval.api.metrics import mean, mean_stderr
    (name,) = {f.name for f in task._filters}
    rounds = {doc_id: responses_for(ex["continuations"][0]) for doc_id, ex in examples.items()}
    for doc_id, ex in examples.items():
        ex["responses"] = []
    results = []
    for k in range(len(next(iter(rounds.values())))):
        for inst in task.instances:
            inst.resps = [rounds[inst.doc_id][k]]
        task.apply_filters()
        scores = []
        for inst in sorted(task.instances, key=lambda i: i.doc_id):
            answer = inst.filtered_resps[name]
            score = task.process_results(docs[inst.doc_id], [answer])["exact_match"]
            examples[inst.doc_id]["responses"].append([rounds[inst.doc_id][k], answer,
                                                       float(score)])
            scores.append(score)
        results.append({f"exact_match,{name}": float(mean(scores)),
                        f"exact_match_stderr,{name}": float(mean_stderr(scores))})
    return results


def main():
    if version("lm_eval") != "0.4.13":
        sys.exit(f"lm-eval 0.4.13 is the reference, found {version('lm_eval')}")
    os.chdir(DATA)
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=DATA, include_defaults=False)
    cases = []
    for name, shots in CASES:
        task = manager.load([name])["tasks"][name]
        if shots is not None and task.get_config("num_fewshot") != 0:
            task.set_config(key="num_fewshot", value=shots)
        elif task.get_config("num_fewshot") is None:
            task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=1234)
        task.build_all_requests(limit=None, rank=0, world_size=1)
        examples = {}
        docs = list(task.eval_docs)
        for inst in task.instances:
            doc_id = inst.doc_id
            ex = examples.setdefault(doc_id, {"doc": doc_id, "context": inst.arguments[0],
                                              "continuations": []})
            if task.OUTPUT_TYPE == "multiple_choice" and inst.idx >= len(
                    task.doc_to_choice(docs[doc_id])):
                # acc_mutual_info's unconditional requests: ("", each continuation)
                assert inst.arguments == ("", ex["continuations"][inst.idx - len(
                    ex["continuations"])])
                continue
            assert ex["context"] == inst.arguments[0]
            if task.OUTPUT_TYPE == "generate_until":
                kwargs = inst.arguments[1]
                # a string is one stop sequence (lm_eval/models/utils.py handle_stop_sequences)
                until = kwargs["until"]
                ex["until"] = [until] if isinstance(until, str) else until
                ex["max_gen_toks"] = kwargs.get("max_gen_toks", 256)
                gold = task.doc_to_target(docs[doc_id])
                if task.config.doc_to_choice is not None:
                    gold = task.doc_to_choice(docs[doc_id])[gold]
                ex["continuations"].append(str(gold))
                continue
            ex["continuations"].append(inst.arguments[1])
        for doc_id, ex in examples.items():
            doc = docs[doc_id]
            if task.OUTPUT_TYPE == "multiple_choice":
                choices = task.doc_to_choice(doc)
                gold = task.doc_to_target(doc)
                ex["gold"] = choices.index(gold) if isinstance(gold, str) else gold
            else:
                ex["gold"] = 0
        case = {"task": name, "num_fewshot": shots,
                "examples": [examples[k] for k in sorted(examples)]}
        if task.OUTPUT_TYPE == "generate_until":
            case["results"] = score_generations(task, docs, examples)
        cases.append(case)
    with open(os.path.join(DATA, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"lm_eval": "0.4.13", "fewshot_seed": 1234, "cases": cases}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
