"""The gate on task metrics, paired example by example (issue 25), on the real tiny model
(stories260K from ../shared/data; skipped without it) over a next-word multiple-choice task made
here from the TinyStories sample (the sentence so far; the word that follows it among three
other words of the text):
  (a) the task stage's example file holds, per example, its document index, the sha256 of its
      requests' texts (recomputed here from the samples file's arguments) and its acc and
      acc_norm (the samples file's);
  (b) a run identical to its pinned baseline: difference exactly 0, paired over every example,
      McNemar p = 1, every check passes;
  (c) a copy of the model with Gaussian noise added to its weights (25% of each tensor's standard
      deviation, the gguf package; acc 0.86 -> 0.58 with 47 and 7 discordant examples), on the same
      examples: max_decrease_sigma and mcnemar_p fail (exit 3); the difference, its paired
      standard error (sample sd over sqrt n) and McNemar's exact p (math.comb, fractions) are
      computed here from both runs' samples files; on 2 ranks (mpirun) the same bytes and verdict;
  (d) other examples (one question changed; fewer examples) are refused (exit 2) naming the first
      differing example; `unpaired: allow` compares the aggregates unpaired and says why;
  (e) mcnemar_p on a metric that is not 0/1 (a baseline whose example file says so, as it says of
      multiple_choice_grade with partial credit, or has a 0.5) is refused (exit 2) naming the
      metric, while max_decrease_sigma pairs it;
  (f) `baseline_history`: the example file is copied beside the history and the next run pairs
      with it."""
import hashlib
import json
import os
import random
import re
import shutil
import sys
from fractions import Fraction
from math import comb, sqrt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
from eval_helpers import MPIRUN, EvalSession, shared_files  # noqa: E402
from checks import check, check_equal  # noqa: E402

MODEL, TEXT = shared_files("models/stories260K.gguf", "text/tinystories_sample.txt")
session = EvalSession("task_gate_")


def next_word_docs():
    """Per sentence of 8 words or more, three places: the words before it, the word there among
    three other words of the text (a fixed seed)."""
    with open(TEXT) as f:
        text = f.read()
    vocab = sorted({w.lower() for w in re.findall(r"[A-Za-z]+", text) if len(w) > 2})
    sentences = [s.split() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 8]
    rng = random.Random(7)
    docs = []
    for words in sentences:
        for k in sorted(rng.sample(range(3, len(words)), 3)):
            gold = re.sub(r"[^A-Za-z]", "", words[k])
            if not gold:
                continue
            choices = [gold] + rng.sample([v for v in vocab if v != gold.lower()], 3)
            rng.shuffle(choices)
            docs.append({"question": " ".join(words[:k]), "choices": choices,
                         "label": choices.index(gold)})
    return docs


def write_task(name, docs):
    """A task YAML (and its JSON Lines) named name in the temporary folder; returns its path."""
    session.write(f"{name}.jsonl", "".join(json.dumps(d) + "\n" for d in docs))
    return session.write(f"{name}.yaml", f"""task: next_word
dataset_path: json
dataset_kwargs:
  data_files:
    test: {name}.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: choices
doc_to_target: label
metric_list:
  - metric: acc
  - metric: acc_norm
metadata:
  version: 1.0
""")


def run(name, task, model=MODEL, gate="", report="outputs: [json]", np=None):
    """Runs a recipe of a task stage (log_samples), an optional gate and a report; returns
    (exit status, stderr, run directory, results.json or None)."""
    gate_stage = f"  gate: {{kind: gate, metrics: tasks, {gate}}}\n" if gate else ""
    verdict = "verdict: gate, " if gate else ""
    recipe = session.write(f"recipe_{name}.yaml", f"""name: task_gate
stages:
  model: {{kind: model, path: "{model}"}}
  tasks: {{kind: task, model: model, tasks: ["{task}"], log_samples: true, threads: 1}}
{gate_stage}  report: {{kind: report, metrics: tasks, {verdict}{report}}}
""")
    rc, _, err, results = session.evalmesh(["run", recipe], np)
    return rc, err, os.path.join(session.tmp, f"run{session.runs}"), results


def samples(run_dir, task="next_word"):
    with open(os.path.join(run_dir, f"samples_{task}.jsonl")) as f:
        return [json.loads(line) for line in f]


def gate_check(results, rule, metric="tasks/next_word.acc"):
    return next(c for c in results["gate"]["checks"] if c["rule"] == rule and c["metric"] == metric)


def mcnemar_p(b, c):
    n, k = b + c, min(b, c)
    return float(min(Fraction(1), Fraction(2 * sum(comb(n, i) for i in range(k + 1)), 2 ** n)))


docs = next_word_docs()
task = write_task("next_word", docs)
N = len(docs)

# (a) the baseline and its example file
rc, err, base_dir, base = run("base", task)
check(rc == 0, f"baseline: exit {rc}: {err[-1500:]}")
base_samples = samples(base_dir)
check_equal(base["examples"]["file"], "examples_tasks.json", "results.json names the example file")
with open(os.path.join(base_dir, "examples_tasks.json"), "rb") as f:
    data = f.read()
check_equal(base["examples"]["sha256"], hashlib.sha256(data).hexdigest(), "its sha256")
examples = json.loads(data)
(entry,) = examples["tasks"]
check_equal(entry["key"], "tasks/next_word", "the task's key")
check_equal(entry["doc"], list(range(N)), "every document in order")
want_sha = []
for s in base_samples:
    h = hashlib.sha256()
    for context, continuation in s["arguments"]:
        h.update(context.encode() + b"\0" + continuation.encode() + b"\0")
    want_sha.append(h.hexdigest())
check_equal(entry["sha256"], want_sha, "each example's sha256 of its requests' texts")
check_equal(entry["binary"], ["acc", "acc_norm"], "acc and acc_norm are 0/1")
for metric in ("acc", "acc_norm"):
    check_equal(entry["values"][metric], [s[metric] for s in base_samples],
                f"per-example {metric} as the samples file's")

CHECKS = ("max_decrease_pct: {tasks/next_word.acc: 1}, "
          "max_decrease_sigma: {tasks/next_word.acc: 1, tasks/next_word.acc_norm: 1}, "
          "mcnemar_p: {tasks/next_word.acc: 0.05}")
PIN = f"baseline: {{pin: \"{base_dir}\"}}, "

# (b) identical: exactly 0, paired, p = 1
rc, err, _, same = run("same", task, gate=PIN + CHECKS)
check(rc == 0, f"identical run: exit {rc}: {err[-1500:]}")
check(same["gate"]["passed"] and same["gate"]["baseline"]["paired"], "identical run: passed, paired")
for c in same["gate"]["checks"]:
    check(c["comparison"] == "paired" and c["examples"] == N and c["difference"] == 0 and
          c["difference_error"] == 0 and c["passed"], f"identical run: {c}")
mc = gate_check(same, "mcnemar_p")
check(mc["p_value"] == 1 and mc["baseline_only_correct"] == 0 and mc["candidate_only_correct"] == 0,
      f"identical run: McNemar p 1 on no discordant example: {mc}")
check("paired over %d examples" % N in gate_check(same, "max_decrease_sigma")["message"],
      "the message says paired over N examples")

# (c) a worse model on the same examples
from gguf_package import require_gguf  # noqa: E402

require_gguf()
import gguf  # noqa: E402
import numpy as np  # noqa: E402

noisy = os.path.join(session.tmp, "noisy.gguf")
shutil.copyfile(MODEL, noisy)
reader = gguf.GGUFReader(noisy, "r+")
rng = np.random.default_rng(11)
for t in reader.tensors:
    if not t.name.endswith("norm.weight"):
        t.data[...] += (0.25 * float(np.std(t.data)) *
                        rng.standard_normal(t.data.shape)).astype(np.float32)
reader.data.flush()
del reader

rc, err, worse_dir, worse = run("worse", task, model=noisy, gate=PIN + CHECKS)
check(rc == 3, f"worse model: exit {rc} (want 3): {err[-1500:]}")
worse_samples = samples(worse_dir)
for metric in ("acc", "acc_norm"):
    d = [w[metric] - b[metric] for w, b in zip(worse_samples, base_samples)]
    mean = sum(d) / N
    se = sqrt(sum((x - mean) ** 2 for x in d) / (N - 1)) / sqrt(N)
    c = gate_check(worse, "max_decrease_sigma", f"tasks/next_word.{metric}")
    check(abs(c["difference"] - mean) < 1e-12, f"{metric}: difference {c['difference']} is {mean}")
    check(abs(c["difference_error"] - se) <= 1e-12 * se,
          f"{metric}: paired error {c['difference_error']} is the sample sd / sqrt n {se}")
    check_equal(c["passed"], mean >= -se, f"{metric}: max_decrease_sigma 1 verdict")
    print(f"{metric}: {sum(b[metric] for b in base_samples) / N:.4f} -> "
          f"{sum(w[metric] for w in worse_samples) / N:.4f}, paired error {se:.4f}")
b = sum(1 for w, s in zip(worse_samples, base_samples) if s["acc"] == 1 and w["acc"] == 0)
c_ = sum(1 for w, s in zip(worse_samples, base_samples) if s["acc"] == 0 and w["acc"] == 1)
p = mcnemar_p(b, c_)
mc = gate_check(worse, "mcnemar_p")
check(mc["baseline_only_correct"] == b and mc["candidate_only_correct"] == c_,
      f"discordant examples b {b}, c {c_}: {mc}")
check(abs(mc["p_value"] - p) <= 1e-12 * p, f"McNemar p {mc['p_value']} is {p} (math.comb)")
check(b > c_ > 0 and p < 0.05 and not mc["passed"], f"the worse model fails mcnemar_p (with "
      f"examples discordant both ways): b {b}, c {c_}, p {p}")
check_equal(mc["message"], f"tasks/next_word.acc: McNemar p = {p:.6g} < 0.05 with {b} examples "
            f"only the baseline got right and {c_} only this run: a significant decrease "
            f"(mcnemar_p 0.05, paired over {N} examples)", "mcnemar_p's message")
check(not gate_check(worse, "max_decrease_sigma")["passed"], "the worse model fails "
      "max_decrease_sigma")
print(f"McNemar: b {b}, c {c_}, p {p:.6g}")
if MPIRUN:  # on 2 ranks: the same example file and the same verdict
    rc, err, dir2, worse2 = run("worse_2ranks", task, model=noisy, gate=PIN + CHECKS, np=2)
    with open(os.path.join(dir2, "examples_tasks.json"), "rb") as f2, \
            open(os.path.join(worse_dir, "examples_tasks.json"), "rb") as f1:
        check(rc == 3 and f2.read() == f1.read() and worse2["gate"] == worse["gate"],
              f"2 ranks: the same example file and verdict: exit {rc}: {err[-1500:]}")

# (d) other examples: refused, naming the first that differs; unpaired: allow
changed = [dict(d) for d in docs]
changed[5]["question"] += " then"
rc, err, _, _ = run("changed", write_task("changed", changed), gate=PIN + CHECKS)
check(rc == 2, f"a changed question: exit {rc} (want 2)")
check("refusing to compare tasks/next_word.acc with the baseline" in err and
      "in task tasks/next_word example 5 differs (doc 5 with requests sha256 "
      f"{want_sha[5][:12]} in the baseline" in err, f"names example 5: {err[-1500:]}")
rc, err, _, _ = run("fewer", write_task("fewer", docs[:-2]), gate=PIN + CHECKS)
check(rc == 2, f"fewer examples: exit {rc} (want 2)")
check(f"example {N - 2} (doc {N - 2}) is only in the baseline: the baseline has {N} examples, "
      f"this run {N - 2}" in err, f"names the first missing example: {err[-1500:]}")
rc, err, _, allowed = run("allowed", write_task("allowed", changed),
                          gate=PIN + "unpaired: allow, max_decrease_sigma: "
                          "{tasks/next_word.acc: 1}")
check(rc in (0, 3) and allowed is not None, f"unpaired: allow: exit {rc}: {err[-1500:]}")
if allowed:
    c = gate_check(allowed, "max_decrease_sigma")
    se = sqrt(base["metrics"]["tasks/next_word"]["acc"]["error"] ** 2 +
              allowed["metrics"]["tasks/next_word"]["acc"]["error"] ** 2)
    check(c["comparison"] == "unpaired" and abs(c["difference_error"] - se) <= 1e-12 * se and
          "unpaired: the examples differ: example 5 differs" in c["message"],
          f"unpaired: allow compares unpaired and says why: {c}")
rc, err, _, _ = run("allowed_mcnemar", write_task("allowed", changed),
                    gate=PIN + "unpaired: allow, mcnemar_p: {tasks/next_word.acc: 0.05}")
check(rc == 2 and "mcnemar_p: tasks/next_word.acc: McNemar's test needs the per-example values "
      "of both runs over the same examples, and this comparison is unpaired: the examples differ"
      in err, f"mcnemar_p unpaired: exit {rc}: {err[-1500:]}")

# (e) mcnemar_p on a metric that is not 0/1: a baseline whose example file says its acc may take
# other values (as multiple_choice_grade does with partial credit), and one whose file has a 0.5
def forged_baseline(name, edit):
    forged = os.path.join(session.tmp, name)
    shutil.copytree(base_dir, forged)
    path = os.path.join(forged, "examples_tasks.json")
    with open(path) as f:
        doc = json.load(f)
    edit(doc["tasks"][0])
    text = json.dumps(doc, separators=(",", ":")) + "\n"
    with open(path, "w") as f:
        f.write(text)
    with open(os.path.join(forged, "results.json")) as f:
        results = json.load(f)
    results["examples"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    with open(os.path.join(forged, "results.json"), "w") as f:
        json.dump(results, f)
    return forged


def partial_credit(t):
    t["binary"] = ["acc_norm"]
    t["values"]["acc"][3] = 0.5


def stray_half(t):
    t["values"]["acc"][3] = 0.5


MCNEMAR = "mcnemar_p: {tasks/next_word.acc: 0.05}"
for name, edit, why in [
        ("partial", partial_credit, "the baseline's values of it may be other than 0 and 1, as a "
         "partial credit"),
        ("half", stray_half, "example 3 (doc 3) has 0.5 in the baseline")]:
    forged = forged_baseline(name, edit)
    rc, err, _, _ = run(f"{name}_mcnemar", task, gate=f"baseline: {{pin: \"{forged}\"}}, " + MCNEMAR)
    check(rc == 2 and f"mcnemar_p: tasks/next_word.acc is not a 0/1 metric ({why}): McNemar's "
          "test needs each example right or wrong; use max_decrease_sigma for it" in err,
          f"{name}: mcnemar_p refused: exit {rc}: {err[-1500:]}")
rc, err, _, sigma = run("partial_sigma", task, gate=f"baseline: {{pin: \"{forged}\"}}, "
                        "max_decrease_sigma: {tasks/next_word.acc: 1}")
c = gate_check(sigma, "max_decrease_sigma") if sigma else {}
check(rc == 0 and c.get("comparison") == "paired" and c.get("examples") == N,
      f"max_decrease_sigma pairs a metric that is not 0/1: exit {rc}: {c} {err[-1500:]}")

# (f) through a history
history = os.path.join(session.tmp, "hist", "tasks.jsonl")
HISTORY = f"outputs: [json, {{type: history, path: \"{history}\"}}]"
rc, err, _, first = run("hist1", task, report=HISTORY)
check(rc == 0, f"history run 1: exit {rc}: {err[-1500:]}")
with open(history) as f:
    line = json.loads(f.readline())
copy = os.path.join(os.path.dirname(history), line["examples"]["file"])
check_equal(line["examples"]["file"], f"tasks.jsonl.examples/{first['examples']['sha256']}.json",
            "the history line names the copy beside it")
check(os.path.exists(copy), f"the example file is copied beside the history: {copy}")
rc, err, _, second = run("hist2", task, model=noisy,
                         gate=f"baseline_history: \"{history}\", " + CHECKS, report=HISTORY)
check(rc == 3 and second["gate"]["baseline"]["paired"] and
      gate_check(second, "mcnemar_p")["p_value"] == mc["p_value"],
      f"history run 2 pairs with run 1 (the same p as against the pinned baseline): exit {rc}: "
      f"{err[-1500:]}")

session.finish()
