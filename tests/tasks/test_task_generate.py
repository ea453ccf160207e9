"""Issue 22: a generate_until task through `evalmesh eval` on the real tiny model (stories260K from
../shared/data; skipped without it or without mpirun). The task is lm-eval's format made here:
JSON Lines + YAML, generate_until with until ["."] and max_gen_toks 60, a filter pipeline (regex
"named (\\w+)" with group_select 0, then take_first) and exact_match with ignore_case. Its
prompts are those of tests/generate/llama_cpp_generate_expected.json (llama.cpp's greedy 60
tokens from each, committed), each twice with a target that matches and one that does not, so
the expected generated text, filtered answer and exact_match of every example come from
llama.cpp's text and Python's re, not from evalmesh. Checked:
  (a) 1 rank: the samples file's resps, filtered_resps, target and exact_match; lm_eval_results
      .json's exact_match and its standard error (lm-eval's mean and mean_stderr, in Python); run
      together with the multiple-choice task of ranks/ (interleaved requests of both kinds);
  (b) 2 ranks (one sequence per batch) and 3 ranks: the samples files, lm_eval_results.json, the
      example file and results.json's metrics are the bytes of the 1-rank run's;
  (c) the 2-rank run's request records (read here, independently of evalmesh): one record per
      generation at its request's index, the generated ids as targets and argmaxes, nll 0;
  (d) resume: rank 1's records removed and rank 0's torn in its last record, the outputs deleted,
      `evalmesh eval --resume` on 3 ranks writes the same bytes, taking exactly the intact
      records;
  (e) --gen-kwargs max_gen_toks=4 and until=the replace the task's; do_sample=true and
      temperature=0.5 are refused with exit 2 and a message;
  (f) a BIG-bench generative task (tests/tasks/bigbench/gen_tiny) is refused without
      --bigbench-generative; with it, every answer is BIG-bench's postprocess_output of the text
      (copied here) and its exact_str_match whether the answer is a target, the same bytes on 2
      ranks (the text itself has no outside reference here: the prompts are not llama.cpp's);
  (g) the paired gate (mcnemar_p, max_decrease_sigma) on exact_match against the 1-rank run;
  (h) SIGTERM to a 2-rank job in the middle of its decoding: exit 6, the finished generations
      recorded whole, and a 3-rank resume gives the uninterrupted run's bytes, taking exactly
      them. The polling's sleeps only pace it;
  (i) tp 2 (dp 1): llama.cpp's texts again.
usage: test_task_generate.py"""
import glob
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from eval_helpers import MPIRUN, EvalSession, shared_files  # noqa: E402
from resume_helpers import HEADER, RECORD_MAGIC, rank_pid, test_env  # noqa: E402
from checks import check, check_equal  # noqa: E402

(MODEL,) = shared_files("models/stories260K.gguf")
if not MPIRUN:
    print("SKIPPED: mpirun not found")
    sys.exit(77)
session = EvalSession("task_generate_")
REFERENCE = json.load(open(os.path.join(HERE, "..", "generate",
                                        "llama_cpp_generate_expected.json")))
MAX_GEN_TOKS = 60
check(all(c["max_tokens"] == MAX_GEN_TOKS for c in REFERENCE["cases"]),
      "the reference generated 60 tokens from each prompt")


def greedy_text(case):
    """llama.cpp's 60 tokens as evalmesh decodes them (no closing "\\n\\n", no leading space of the
    first piece; see tests/generate/test_generate_llama_cpp.py), cut before the first "."."""
    text = case["printed"][:-2]
    text = text[1:] if text.startswith(" ") else text
    return text.split(".")[0]


def filtered(text):
    """lm-eval's RegexFilter (findall, group_select 0, fallback "[invalid]") then take_first."""
    match = re.findall(r"named (\w+)", text)
    return match[0].strip() if match else "[invalid]"


docs, expected = [], []
for case in REFERENCE["cases"]:
    text = greedy_text(case)
    answer = filtered(text)
    right = answer.swapcase() if answer != "[invalid]" else "Lily"
    for target in [right, "Nobody"]:
        docs.append({"prompt": case["prompt"], "answer": target})
        expected.append((text, answer, target, int(answer.lower() == target.lower())))
session.write("stories_gen.jsonl", "".join(json.dumps(d) + "\n" for d in docs))
session.write("stories_gen.yaml", """task: stories_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: stories_gen.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{prompt}}"
doc_to_target: answer
generation_kwargs:
  until: ["."]
  max_gen_toks: 60
  do_sample: false
filter_list:
  - name: name
    filter:
      - function: regex
        regex_pattern: "named (\\\\w+)"
        group_select: 0
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
metadata:
  version: 1.0
""")
for name in ["stories_mc.yaml", "stories_mc.jsonl", "stories_train.jsonl"]:
    shutil.copy(os.path.join(HERE, "ranks", name), session.tmp)
TASKS = ",".join(os.path.join(session.tmp, n) for n in ["stories_gen.yaml", "stories_mc.yaml"])
EVAL = ["eval", "-m", MODEL, "--tasks", TASKS, "--log-samples", "-t", "1"]
FILES = ["samples_stories_gen.jsonl", "samples_stories_mc.jsonl", "lm_eval_results.json",
         "examples_tasks.json"]


def run_dir():
    return os.path.join(session.tmp, f"run{session.runs}")


def outputs(folder):
    """{file: bytes or None} of FILES, and results.json's metrics without timings."""
    out = {}
    for name in FILES:
        path = os.path.join(folder, name)
        out[name] = open(path, "rb").read() if os.path.exists(path) else None
    path = os.path.join(folder, "results.json")
    out["metrics"] = ({k: v for k, v in json.load(open(path))["metrics"].items()
                       if not v.get("timing")} if os.path.exists(path) else None)
    return out


# (a) one rank, against llama.cpp's text and Python's filter and exact_match
code, out, err, _ = session.evalmesh(EVAL)
check_equal(code, 0, "1 rank: exit status")
one_dir = run_dir()
one = outputs(one_dir)
samples = [json.loads(line) for line in (one[FILES[0]] or b"").decode().splitlines()]
check_equal(len(samples), len(expected), "1 rank: a samples line per example")
for k, (sample, (text, answer, target, match)) in enumerate(zip(samples, expected)):
    got = (sample["resps"], sample["filtered_resps"], sample["target"], sample["exact_match"],
           sample["arguments"][0][1])
    want = ([[text]], [answer], target, match, {"until": ["."], "max_gen_toks": MAX_GEN_TOKS})
    check_equal(got, want, f"example {k} (prompt {docs[k]['prompt']!r}): text, answer, score")
values = [e[3] for e in expected]
mean = math.fsum(values) / len(values)
stderr = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) / math.sqrt(
    len(values))
results = json.loads(one["lm_eval_results.json"] or b"{}").get("results", {})
check_equal((results.get("stories_gen", {}).get("exact_match,name"),
             results.get("stories_gen", {}).get("exact_match_stderr,name")), (mean, stderr),
            "1 rank: exact_match and its standard error")
check("stories_mc" in results and "acc,none" in results["stories_mc"],
      "1 rank: the multiple-choice task scored alongside", str(results))
print(f"exact_match {mean} +- {stderr} over {len(values)} examples")

# (b) 2 ranks, one sequence per batch (a prompt and 60 tokens take more than 61 positions), and 3
for np, extra in [(2, ["--batch-tokens", "61"]), (3, [])]:
    code, out, err, _ = session.evalmesh(EVAL + extra, np=np)
    check_equal(code, 0, f"{np} ranks: exit status")
    check(outputs(run_dir()) == one, f"{np} ranks: the bytes of the 1-rank run", err[-2000:])
    if np == 2:
        two_dir = run_dir()


# (c) the generation records
def records(path):
    """[(index, ids, argmax, nll, words, bytes)] of a records file, and where its last whole
    record ends (window_records.h's layout)."""
    data = open(path, "rb").read()
    at, got = HEADER, []
    while at + 12 <= len(data):
        magic, length, _ = struct.unpack_from("<III", data, at)
        if magic != RECORD_MAGIC or at + 12 + length > len(data):
            break
        index, n, _, words, nbytes, _ = struct.unpack_from("<qiiqqd", data, at + 12)
        ids = struct.unpack_from(f"<{n}i", data, at + 12 + 40)
        argmax = struct.unpack_from(f"<{n}i", data, at + 12 + 40 + 4 * n)
        nll = struct.unpack_from(f"<{n}d", data, at + 12 + 40 + 8 * n)
        got.append((index, ids, argmax, nll, words, nbytes))
        at += 12 + length
    return got, at


files = sorted(glob.glob(os.path.join(two_dir, "records", "tasks.rank*.bin")))
check_equal(len(files), 2, "2 ranks: a records file per rank")
generations = {}
for path in files:
    for index, ids, argmax, nll, words, nbytes in records(path)[0]:
        if index < len(docs):  # stories_gen's requests come first, one per example
            check(index not in generations, f"request {index} recorded once")
            generations[index] = (ids, argmax, nll, words, nbytes)
check_equal(sorted(generations), list(range(len(docs))), "every generation recorded")
for index, (ids, argmax, nll, words, nbytes) in sorted(generations.items()):
    check(ids == argmax and all(x == 0 for x in nll) and 0 < len(ids) <= MAX_GEN_TOKS
          and words in (0, 1, 2) and nbytes >= 1,
          f"request {index}: the generated ids as targets and argmaxes, nll 0", str(ids))

# (d) resume on 3 ranks from damaged records
rank0 = [p for p in files if ".rank0." in p][0]
kept, end = records(rank0)
with open(rank0, "r+b") as f:
    f.truncate(end - 7)  # its last record torn
os.remove([p for p in files if ".rank1." in p][0])
for name in FILES + ["results.json"]:
    if os.path.exists(os.path.join(two_dir, name)):
        os.remove(os.path.join(two_dir, name))
cmd = [MPIRUN, "-np", "3", "--allow-run-as-root", "--oversubscribe",
       os.environ["EVALMESH_BIN"], "eval", "--resume", two_dir]
r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
check_equal(r.returncode, 0, "resume on 3 ranks: exit status")
check(outputs(two_dir) == one, "resume on 3 ranks: the bytes of the 1-rank run", r.stderr[-2000:])
taken = sum(int(n) for n in re.findall(r"(\d+) requests taken from the run's records", r.stderr))
check_equal(taken, len(kept) - 1, "resume: exactly the intact records taken")
print(f"resume on 3 ranks: {taken} requests taken from the records")

# (e) --gen-kwargs
code, out, err, _ = session.evalmesh(["eval", "-m", MODEL, "--tasks", TASKS.split(",")[0],
                                      "--log-samples", "--gen-kwargs",
                                      "max_gen_toks=4,until=the,do_sample=false,temperature=0"])
check_equal(code, 0, "--gen-kwargs max_gen_toks=4,until=the: exit status")
lines = [json.loads(line) for line in open(os.path.join(run_dir(), FILES[0]))]
for k, (line, (text, _, _, _)) in enumerate(zip(lines, expected)):
    resp = line["resps"][0][0]
    check(line["arguments"][0][1] == {"until": ["the"], "max_gen_toks": 4}
          and text.startswith(resp) and "the" not in resp and len(resp.split()) <= 4,
          f"--gen-kwargs: example {k}'s text {resp!r} is a prefix of {text!r} cut by the new "
          "stop string and 4 tokens", str(line["arguments"]))
for kwargs, message in [
        ("do_sample=true", "--gen-kwargs do_sample=true: evalmesh decodes greedily, the same text "
                           "on any number of ranks; sampling is not supported (do_sample=false)"),
        ("max_gen_toks=8,temperature=0.5", "--gen-kwargs temperature=0.5: evalmesh decodes "
                                           "greedily"),
        ("top_k=5", "--gen-kwargs key 'top_k' is not supported (max_gen_toks, until, "
                    "do_sample=false, temperature=0)"),
]:
    code, out, err, _ = session.evalmesh(["eval", "-m", MODEL, "--tasks", TASKS,
                                          "--gen-kwargs", kwargs])
    check(code == 2 and message in err, f"--gen-kwargs {kwargs}: exit 2 and the message",
          f"exit {code}: {err[-800:]}")


# (f) a BIG-bench generative task (exact_str_match): refused without bigbench_generative; with
# it, the filtered answer is BIG-bench's postprocess_output of the text (copied below) and the
# score whether it is a target, the same bytes on 2 ranks
def postprocess_output(text, max_length, stop_string, output_regex):
    """bigbench/models/model_utils.py (bigbench 1.0.0), copied (strings only)."""
    if max_length:
        text = text[:max_length]
    if stop_string:
        index = text.find(stop_string)
        if index > 0:
            text = text[: index + len(stop_string)]
    if output_regex:
        text = next(iter(re.findall(output_regex, text)), "")
    return text


GEN_TINY = os.path.join(HERE, "bigbench", "gen_tiny")
code, out, err, _ = session.evalmesh(["eval", "-m", MODEL, "--tasks", GEN_TINY])
check(code == 2 and "task 'gen_tiny' is generative (metrics: exact_str_match): it loads with the "
      "task stage's bigbench_generative (evalmesh eval --bigbench-generative)" in err,
      "BIG-bench generative task without --bigbench-generative: exit 2 and the message",
      f"exit {code}: {err[-800:]}")
BIGBENCH = ["eval", "-m", MODEL, "--tasks", GEN_TINY, "--bigbench-generative", "--log-samples",
            "-t", "1"]
code, out, err, _ = session.evalmesh(BIGBENCH)
check_equal(code, 0, "BIG-bench generative task: exit status")
bb_dir = run_dir()
spec = json.load(open(os.path.join(GEN_TINY, "task.json")))
lines = [json.loads(line) for line in open(os.path.join(bb_dir, "samples_gen_tiny.jsonl"))]
scores = []
for k, line in enumerate(lines):
    answer = postprocess_output(line["resps"][0][0], 256, spec.get("stop_string"),
                                spec.get("output_regex"))
    targets = line["target"] if isinstance(line["target"], list) else [line["target"]]
    scores.append(int(answer in targets))
    check(line["filtered_resps"] == [answer] and line["exact_str_match"] == scores[-1],
          f"gen_tiny example {k}: BIG-bench's post-processing and exact_str_match",
          f"{line['filtered_resps']} {line['exact_str_match']}, want {answer!r} {scores[-1]}")
results = json.load(open(os.path.join(bb_dir, "lm_eval_results.json")))["results"]["gen_tiny"]
distinct = {json.dumps(e, sort_keys=True) for e in spec["examples"]}  # BIG-bench drops repeats
check(len(lines) == len(distinct) and
      results["exact_str_match,none"] == math.fsum(scores) / len(scores),
      "gen_tiny: exact_str_match is the mean of the examples'", str(results))
code, out, err, _ = session.evalmesh(BIGBENCH, np=2)
check(code == 0 and all(open(os.path.join(run_dir(), n), "rb").read()
                        == open(os.path.join(bb_dir, n), "rb").read()
                        for n in ["samples_gen_tiny.jsonl", "lm_eval_results.json"]),
      "gen_tiny on 2 ranks: the bytes of the 1-rank run", f"exit {code}: {err[-800:]}")

# (g) the paired gate on exact_match: the 1-rank run as the baseline of an identical run, paired
# over its 10 examples with McNemar's test (exact_match is 0/1)
gate_recipe = session.write("gate.yaml", f"""name: gate
stages:
  model: {{kind: model, path: "{MODEL}"}}
  tasks: {{kind: task, model: model, tasks: ["{TASKS.split(",")[0]}"], threads: 1}}
  gate: {{kind: gate, metrics: tasks, baseline: {{pin: "{one_dir}"}},
         mcnemar_p: {{tasks/stories_gen.exact_match: 0.05}},
         max_decrease_sigma: {{tasks/stories_gen.exact_match: 1}}}}
  report: {{kind: report, metrics: tasks, verdict: gate, outputs: [json]}}
""")
code, out, err, results = session.evalmesh(["run", gate_recipe])
checks = results["gate"]["checks"] if results else []
check(code == 0 and len(checks) == 2 and all(c["comparison"] == "paired" and c["examples"] == 10
                                             and c["passed"] for c in checks),
      f"the gate pairs exact_match over the 10 examples: exit {code}: {checks} {err[-1500:]}")

# (h) SIGTERM to both ranks of a 2-rank job in the middle of their decoding (60 examples of 200
# tokens, two sequences decoded together per batch): exit 6, each rank says it was interrupted,
# its records whole; resumed on 3 ranks, the bytes of an uninterrupted 1-rank run, taking exactly
# the recorded generations
NAMES = ["Lily", "Tom", "Ben", "Sue", "Max", "Mia", "Sam", "Anna", "Tim", "Zoe"]
ANIMALS = ["dog", "cat", "bear", "bird", "fish", "frog"]
session.write("long_gen.jsonl", "".join(
    json.dumps({"prompt": f"{NAMES[i % 10]} and the {ANIMALS[i // 10]} went to the",
                "answer": NAMES[i * 7 % 10]}) + "\n" for i in range(60)))
session.write("long_gen.yaml", open(os.path.join(session.tmp, "stories_gen.yaml")).read()
              .replace("stories_gen", "long_gen"))
LONG = ["eval", "-m", MODEL, "--tasks", os.path.join(session.tmp, "long_gen.yaml"),
        "--log-samples", "-t", "1", "--gen-kwargs", "max_gen_toks=200,until=@@"]
LONG_FILES = ["samples_long_gen.jsonl", "lm_eval_results.json", "examples_tasks.json"]
code, out, err, _ = session.evalmesh(LONG)
check_equal(code, 0, "long task, uninterrupted: exit status")
whole = {n: open(os.path.join(run_dir(), n), "rb").read() for n in LONG_FILES}
ENV = test_env()
cut = os.path.join(session.tmp, "cut")
job = subprocess.Popen([MPIRUN, "-np", "2", "--allow-run-as-root", "--oversubscribe",
                        os.environ["EVALMESH_BIN"], *LONG, "--batch-tokens", "500",
                        "--run-dir", cut], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=ENV, start_new_session=True)
pids = {}
deadline = time.monotonic() + 300
while job.poll() is None and time.monotonic() < deadline and len(pids) < 2:
    for r in range(2):
        files = glob.glob(os.path.join(cut, "records", f"tasks.rank{r}.*.bin"))
        if r not in pids and files and os.path.getsize(files[0]) > HEADER:
            pid = rank_pid(cut, r)
            if pid:
                pids[r] = pid
    time.sleep(0.005)  # paces the polling only
for pid in pids.values():
    os.kill(pid, signal.SIGTERM)
_, err = job.communicate(timeout=600)
check(len(pids) == 2 and job.returncode == 6,
      f"sigterm: both ranks signalled after their first records, exit 6 ({job.returncode})",
      err[-2000:])
check(err.count("interrupted by signal 15 (Terminated)") == 2, "sigterm: every rank says so",
      err[-3000:])
recorded = 0
for path in glob.glob(os.path.join(cut, "records", "tasks.rank*.bin")):
    got, end = records(path)
    check(end == os.path.getsize(path) and all(ids == argmax for _, ids, argmax, *_ in got),
          f"sigterm: {os.path.basename(path)} holds whole generation records")
    recorded += len(got)
print(f"sigterm: {recorded} of 60 generations recorded")
check(0 < recorded < 60, f"sigterm: some but not all generations recorded ({recorded})")
r = subprocess.run([MPIRUN, "-np", "3", "--allow-run-as-root", "--oversubscribe",
                    os.environ["EVALMESH_BIN"], "eval", "--resume", cut], capture_output=True,
                   text=True, timeout=600, env=ENV)
check_equal(r.returncode, 0, "sigterm: resume on 3 ranks: exit status")
got = {n: open(os.path.join(cut, n), "rb").read() if os.path.exists(os.path.join(cut, n))
       else None for n in LONG_FILES}
check(got == whole, "sigterm: resume on 3 ranks: the bytes of the uninterrupted run",
      r.stderr[-2000:])
taken = sum(int(n) for n in re.findall(r"(\d+) requests taken from the run's records", r.stderr))
check_equal(taken, recorded, "sigterm: the resume took exactly the recorded generations")

# (i) tp 2: each decoding step's products split over 2 ranks (within 1e-5 of tp 1, not the same
# bits); on these prompts, whose greedy choices are not near ties, the same texts as llama.cpp's
tp_recipe = session.write("tp.yaml", f"""name: tp
stages:
  model: {{kind: model, path: "{MODEL}"}}
  grid: {{kind: mesh, dp: 1, tp: 2}}
  tasks: {{kind: task, model: model, mesh: grid, tasks: ["{TASKS.split(",")[0]}"],
          log_samples: true, threads: 1}}
  report: {{kind: report, metrics: tasks, outputs: [json]}}
""")
code, out, err, _ = session.evalmesh(["run", tp_recipe], np=2)
check_equal(code, 0, "tp 2: exit status")
if code == 0:
    texts = [json.loads(line)["resps"][0][0]
             for line in open(os.path.join(run_dir(), "samples_stories_gen.jsonl"))]
    check_equal(texts, [e[0] for e in expected], "tp 2: llama.cpp's texts")
session.finish()
