"""Writes bigbench_expected.json: the prompts and continuations BIG-bench 1.0.0 makes for a few
real tasks, and how it scores multiple_choice_grade, for tests/tasks/test_bigbench_task.c and
test_bigbench_scoring.c (and for the committed task under bigbench/). The functions below are bigbench/api/json_task.py's default_format_fn,
make_nshot_dataset and the part of JsonTask.load_and_process_json that reads a task, and
task_metrics.py's argmax, copied from the sdist (json_task.py imports tensorflow, so its logic
is copied, not imported), with scipy.special.logsumexp as scipy 1.x before 1.15 computes it.
    python3 tests/tasks/bigbench_reference.py BENCHMARK_TASKS_DIR > tests/tasks/bigbench_expected.json
(BENCHMARK_TASKS_DIR: what tools/fetch-bigbench prints; NumPy 1.24 of tools/python-env.)"""
import collections
import copy
import hashlib
import json
import os
import sys

import numpy as np


# ---- json_task.py (bigbench 1.0.0), copied ----------------------------------------------------
def default_format_fn(sample, input_prefix, output_prefix, choice_prefix, random_seed,
                      append_choices_to_input=True):
    def input_format(text):
        return input_prefix + text

    rng = np.random.RandomState(seed=random_seed)

    if "target_scores" in sample:
        choice_dic = sample["target_scores"]
        if append_choices_to_input:
            permuted_choices = rng.permutation(sorted(list(choice_dic.keys())))
            sample["input"] = (
                sample["input"] + choice_prefix + choice_prefix.join(permuted_choices)
            )
        if "target" not in sample:
            max_score = max(choice_dic.values())  # type: ignore
            min_score = min(choice_dic.values())
            if (len(choice_dic) == 1 and max_score == 0) or (
                len(choice_dic) > 1 and max_score <= min_score
            ):  # Correct choices should have higher score.
                raise ValueError(f"No correct choice provided in example: {sample}")
            sample["target"] = [k for k, v in choice_dic.items() if v == max_score][0]
        sample["choice"] = list(sample["target_scores"].keys())

    sample["input"] = input_format(sample["input"]) + output_prefix
    if not isinstance(sample["target"], list):
        sample["target"] = [sample["target"]]
    return sample


def make_nshot_dataset(samples, shots, random_seed, repeat_samples=1, separator=" ",
                       max_examples=None):
    rng = np.random.RandomState(seed=random_seed)

    samples = copy.deepcopy(samples)

    if shots == 0:
        if max_examples and max_examples < len(samples):
            return rng.choice(samples, max_examples, replace=False).tolist()
        else:
            return samples

    if len(samples) < shots + 1:
        raise ValueError("Do not have enough examples for the number of shots")

    if repeat_samples != 1:
        samples = samples * repeat_samples

    fewshot_samples = []

    if max_examples is not None:
        query_samples = rng.choice(samples, max_examples, replace=False)
    else:
        query_samples = samples

    for sample in query_samples:
        validation_example = copy.deepcopy(sample)
        valid_samples = [x for x in samples if x != sample]
        shot_examples = list(rng.choice(valid_samples, shots, replace=False))

        context = separator.join(
            [
                example["input"] + rng.choice(example["target"])
                for example in shot_examples
            ]
        )
        validation_example["input"] = context + separator + validation_example["input"]

        fewshot_samples.append(validation_example)

    return fewshot_samples


def load_json_file(path):
    with open(path, "rb") as f:
        return json.load(f, object_pairs_hook=collections.OrderedDict)


def get_subdir_json_file_paths(base_dir):
    dirs = os.listdir(base_dir)
    tasks_dirs = [os.path.join(base_dir, d) for d in dirs]
    tasks_dirs = [d for d in tasks_dirs if os.path.isdir(d)]
    json_paths = [os.path.join(d, "task.json") for d in tasks_dirs]
    json_paths = [p for p in json_paths if os.path.exists(p)]
    return {os.path.split(os.path.split(p)[0])[-1]: p for p in json_paths}


class JsonTask:
    """JsonTask's reading of a task (load_and_process_json) and evaluate_fixed_shot's prompts."""

    def __init__(self, task_data, parent_task=None, max_examples=None, random_seed=42,
                 shot_list=(0,)):
        self.parent_task = parent_task
        self.max_examples = max_examples
        self.shot_list = list(shot_list)
        self.subtasks = []
        if isinstance(task_data, str):
            json_dir = os.path.split(task_data)[0]
            task_data = load_json_file(task_data)
            if "examples" not in task_data:
                subtasks = sorted(get_subdir_json_file_paths(json_dir).values())
                task_data["subtasks"] = [load_json_file(t) for t in subtasks]
        self.task_data = task_data
        task_name = task_data["name"].encode("ascii", errors="replace").decode()
        self.name = f"{parent_task.name}:{task_name}" if parent_task else task_name
        self.absolute_normalization = task_data.get("absolute_normalization", False)
        self.subtasks = [JsonTask(t, parent_task=self, max_examples=max_examples,
                                  random_seed=random_seed, shot_list=shot_list)
                         for t in task_data.get("subtasks", [])]
        if self.subtasks:
            return
        input_prefix = task_data.get("example_input_prefix", "\nQ: ")
        output_prefix = task_data.get("example_output_prefix", "\nA: ")
        choice_prefix = task_data.get("choice_prefix", "\n  choice: ")
        append_choices_to_input = task_data.get("append_choices_to_input", True)
        self.few_shot_example_separator = task_data.get("few_shot_example_separator", "\n")
        example_set = set()
        distinct_examples = []
        self.doc_index = []
        for i, x in enumerate(task_data["examples"]):
            example_string = json.dumps(x)
            if example_string in example_set:
                continue
            distinct_examples.append(x)
            example_set.add(example_string)
            self.doc_index.append(i)
        task_data["examples"] = distinct_examples
        self._ds = [
            default_format_fn(sample, input_prefix=input_prefix, output_prefix=output_prefix,
                              choice_prefix=choice_prefix, random_seed=random_seed,
                              append_choices_to_input=append_choices_to_input)
            for sample in task_data["examples"]
        ]
        self.task_prefix = str(task_data.get("task_prefix", ""))

    @property
    def num_examples(self):
        if self.max_examples:
            return min(self.max_examples, len(self._ds))
        return len(self._ds)

    def prompts(self, num_shots, generative=False, random_seed=42):
        samples = make_nshot_dataset(self._ds, num_shots, random_seed=random_seed,
                                     separator=self.few_shot_example_separator,
                                     max_examples=self.num_examples)
        inputs = [self.task_prefix + sample["input"] for sample in samples]
        targets = [sample["target" if generative else "choice"] for sample in samples]
        return samples, inputs, targets


# ---- task_metrics.py, copied; scipy.special.logsumexp (scipy < 1.15) for one vector --------------
def argmax(array):
    """argmax with deterministic pseudorandom tie breaking."""
    max_indices = np.arange(len(array))[array == np.max(array)]
    idx = int(hashlib.sha256(np.asarray(array).tobytes()).hexdigest(), 16) % len(max_indices)
    return max_indices[idx]


def logsumexp(a):
    a = np.asarray(a)
    a_max = np.amax(a, keepdims=True)
    if a_max.ndim > 0:
        a_max[~np.isfinite(a_max)] = 0
    tmp = np.exp(a - a_max)
    s = np.sum(tmp, keepdims=True)
    out = np.log(s)
    a_max = np.squeeze(a_max)
    out = np.squeeze(out) + a_max
    return out


# ---- what the tests compare ---------------------------------------------------------------------
def doc_of(task, sample):
    """The file index of the distinct example a prompt was made for (the json.dumps text of the
    sample's fields, input's value aside, equal; its input the end of the prompt); exactly one
    must match."""
    def fields(x):
        return json.dumps([(k, None if k == "input" else v) for k, v in x.items()])
    found = [task.doc_index[j] for j, x in enumerate(task._ds)
             if fields(x) == fields(sample) and sample["input"].endswith(x["input"])]
    assert len(found) == 1, (task.name, found)
    return found[0]


def leaves(task):
    return [t for s in task.subtasks for t in leaves(s)] if task.subtasks else [task]


def formatting_case(tasks_dir, name, shots, limit):
    root = JsonTask(os.path.join(tasks_dir, name, "task.json"), shot_list=[shots])
    out = []
    for leaf in leaves(root):
        leaf.max_examples = limit or None
        generative = "target_scores" not in leaf._ds[0]
        samples, inputs, targets = leaf.prompts(shots, generative)
        examples = []
        for sample, prompt, choices in zip(samples, inputs, targets):
            if generative:  # the targets a response may equal (exact_str_match)
                examples.append({"doc": doc_of(leaf, sample),
                                 "context_sha256": hashlib.sha256(prompt.encode()).hexdigest(),
                                 "context": prompt, "continuations": choices})
                continue
            scores = [sample["target_scores"][c] for c in choices]
            best = max(scores)
            examples.append({
                "doc": doc_of(leaf, sample),
                "context_sha256": hashlib.sha256(prompt.encode()).hexdigest(),
                "context": prompt,
                "continuations": choices,
                "target_scores": scores,
                "gold": scores.index(best) if scores.count(best) == 1 else -1,
            })
        examples.sort(key=lambda e: e["doc"])
        for e in examples[1:]:
            del e["context"]  # the first in full, the others by their digest
        out.append({"name": leaf.name, "absolute_normalization": bool(leaf.absolute_normalization),
                    "examples": examples})
    return {"task": name, "shots": shots, "limit": limit, "tasks": out}


# (task folder, shots, limit): append_choices_to_input false (novel_concepts), subtasks
# (conceptual_combinations), few-shot prefixes and choice_prefix (logical_args), duplicate
# examples (entailed_polarity), append_choices_to_input "false", a true string
# (logic_grid_puzzle).
CASES = [("novel_concepts", 0, 0), ("novel_concepts", 2, 0), ("novel_concepts", 0, 10),
         ("conceptual_combinations", 0, 0), ("conceptual_combinations", 3, 0),
         ("logical_args", 0, 0), ("logical_args", 3, 0), ("logical_args", 3, 5),
         ("entailed_polarity", 0, 0), ("entailed_polarity", 2, 0),
         ("logic_grid_puzzle", 0, 20), ("logic_grid_puzzle", 2, 20)]

# The committed tasks, whose test runs without the sdist: tests/tasks/bigbench/tiny (a duplicate
# example, tied best choices) and equal_examples (examples == in Python, which are not each
# other's shots, and examples in another key order, which are).
LOCAL_CASES = [("tiny", 0, 0), ("tiny", 2, 0), ("tiny", 1, 2), ("tiny", 0, 2),
               ("equal_examples", 1, 0), ("equal_examples", 2, 0)]

# Generative tasks (exact_str_match): one target or several (simple_arithmetic_multiple_targets_json,
# whose few-shot answers are drawn from them), prefixes and a stop_string (operators), max_examples
# (word_unscrambling), and the committed gen_tiny (a duplicate example, lists of targets).
GENERATIVE_CASES = [("simple_arithmetic_multiple_targets_json", 0, 0),
                    ("simple_arithmetic_multiple_targets_json", 2, 0), ("operators", 1, 0),
                    ("word_unscrambling", 0, 20), ("word_unscrambling", 3, 10)]
LOCAL_GENERATIVE_CASES = [("gen_tiny", 0, 0), ("gen_tiny", 2, 0), ("gen_tiny", 1, 3)]

# Log-likelihood sums of choices: distinct, tied at the top (two, three), one choice.
SCORING = [[-3.5, -1.25, -7.0], [-2.0, -2.0, -5.0], [-0.5, -4.0, -0.5, -0.5], [-1.0],
           [-12.345678901234, -12.345678901235, -30.0, -12.345678901234],
           [-1e-3, -2e-3, -1e-3, -4e-3, -5e-3, -6e-3, -7e-3, -8e-3, -9e-3, -1e-3]]


def scoring_case(sums, absolute):
    normalized = list(np.array(sums) - logsumexp(sums))
    log_prob = sums if absolute else normalized
    return {"sums": sums, "absolute_normalization": absolute,
            "scores": [float(x) for x in log_prob], "chosen": int(argmax(log_prob))}


def main():
    tasks_dir = sys.argv[1]
    cases = [formatting_case(tasks_dir, *c) for c in CASES]
    local_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bigbench")
    local = [formatting_case(local_dir, *c) for c in LOCAL_CASES]
    scoring = [scoring_case(s, a) for s in SCORING for a in (False, True)]
    generative = [formatting_case(tasks_dir, *c) for c in GENERATIVE_CASES]
    local_generative = [formatting_case(local_dir, *c) for c in LOCAL_GENERATIVE_CASES]
    json.dump({"bigbench": "1.0.0", "numpy": np.__version__, "formatting": cases,
               "local_formatting": local, "scoring": scoring,
               "generative_formatting": generative,
               "local_generative_formatting": local_generative}, sys.stdout, separators=(",", ":"), ensure_ascii=False)
    sys.stdout.write("\n")


main()
