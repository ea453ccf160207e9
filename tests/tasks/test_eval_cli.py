"""`evalmesh eval` and `evalmesh tasks` on BIG-bench tasks by name: a BIG-bench tasks folder made of
the committed task files (tests/tasks/bigbench/, EVALMESH_CACHE pointing at it) lists them and
loads them by name; a BIG-bench task's samples and lm-eval results are the same bytes on 1 and 2
ranks (and with --no-mmap) and its multiple_choice_grade is the mean of the samples' grades; bad task names and files
are exit 2 with one message naming them, and nothing is half-written; the paired gate on a grade
with partial credit pairs an identical run and refuses McNemar's test; a generate_until task in
lm-eval's format (gsm_like) is decoded and its exact_match is the mean of its samples'."""
import json
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from eval_helpers import BIN, EvalSession, shared_files  # noqa: E402
from checks import check, check_equal  # noqa: E402

(MODEL,) = shared_files("models/stories260K.gguf")
session = EvalSession("eval_cli_")
cache = os.path.join(session.tmp, "cache")
tasks_dir = os.path.join(cache, "bigbench-1.0.0", "benchmark_tasks")
for name in ("tiny", "mixed"):
    shutil.copytree(os.path.join(HERE, "bigbench", name), os.path.join(tasks_dir, name))
os.environ["EVALMESH_CACHE"] = cache

# evalmesh tasks: the sources, bigbench_lite's members and the folder's tasks
p = subprocess.run([BIN, "tasks"], capture_output=True, text=True, timeout=60)
check_equal(p.returncode, 0, "evalmesh tasks: exit status")
check("BIG-bench task or group by name" in p.stdout, "evalmesh tasks names the sources", p.stdout)
check("bigbench_lite:" in p.stdout and "vitaminc_fact_verification" in p.stdout,
      "evalmesh tasks lists bigbench_lite's members", p.stdout)
check(f"BIG-bench tasks in {tasks_dir} (2):\n  mixed" in p.stdout and "tiny\n" in p.stdout,
      "evalmesh tasks lists the folder's two tasks", p.stdout)
p = subprocess.run([BIN, "tasks"], capture_output=True, text=True, timeout=60,
                   env=dict(os.environ, EVALMESH_CACHE=os.path.join(session.tmp, "none")))
check(p.returncode == 0 and "run tools/fetch-bigbench" in p.stdout,
      "evalmesh tasks without the sdist says how to fetch it", p.stdout)


def outputs(run_dir):
    out = {}
    for name in sorted(os.listdir(run_dir)):
        if name == "lm_eval_results.json" or name.startswith("samples_"):
            with open(os.path.join(run_dir, name), "rb") as f:
                out[name] = f.read()
    return out


EVAL = ["eval", "-m", MODEL, "--tasks", "tiny,mixed", "--log-samples", "-t", "1"]
code, out, err, _ = session.evalmesh(EVAL)
check_equal(code, 0, "BIG-bench tasks by name: exit status")
one = outputs(os.path.join(session.tmp, f"run{session.runs}"))
check_equal(sorted(one), ["lm_eval_results.json", "samples_mixed:arithmetic.jsonl",
                          "samples_tiny.jsonl"], "files written (mixed's generative subtask left out)")
check("|tiny|1.0.0|none|0|multiple_choice_grade|" in out, "lm-eval's table printed", out)
results = json.loads(one["lm_eval_results.json"])["results"]
for task in ("tiny", "mixed:arithmetic"):
    grades = [json.loads(line)["multiple_choice_grade"]
              for line in one[f"samples_{task}.jsonl"].decode().splitlines()]
    check(len(grades) > 1 and math.fsum(grades) / len(grades)
          == results[task]["multiple_choice_grade,none"],
          f"{task}: multiple_choice_grade is the mean of the samples' grades", str(grades))

code, out, err, _ = session.evalmesh(EVAL, np=2)
check_equal(code, 0, "2 ranks: exit status")
check(outputs(os.path.join(session.tmp, f"run{session.runs}")) == one,
      "2 ranks: the same samples and lm-eval results as 1 rank")
code, out, err, _ = session.evalmesh(EVAL + ["--no-mmap"], np=2)
check_equal(code, 0, "2 ranks, --no-mmap: exit status")
check(outputs(os.path.join(session.tmp, f"run{session.runs}")) == one,
      "2 ranks with the weights read into memory (--no-mmap): the same bytes as 1 rank mapped")

# the paired gate on a BIG-bench grade with partial credit (tiny's " 8" scores 0.5): an identical
# run is paired over the same examples and differs by exactly 0; McNemar's test is refused, since
# the grade is not right-or-wrong
def gate_run(name, gate):
    recipe = session.write(f"{name}.yaml", f"""name: {name}
stages:
  model: {{kind: model, path: "{MODEL}"}}
  tasks: {{kind: task, model: model, tasks: [tiny], threads: 1}}
{"  gate: {kind: gate, metrics: tasks, " + gate + "}" if gate else ""}
  report: {{kind: report, metrics: tasks, {"verdict: gate, " if gate else ""}outputs: [json]}}
""")
    code, _, err, results = session.evalmesh(["run", recipe])
    return code, err, os.path.join(session.tmp, f"run{session.runs}"), results


code, err, base_dir, _ = gate_run("baseline", "")
check_equal(code, 0, "BIG-bench baseline run: exit status")
pin = f'baseline: {{pin: "{base_dir}"}}, '
code, err, _, results = gate_run(
    "same", pin + "max_decrease_sigma: {tasks/tiny.multiple_choice_grade: 1}")
checks = results["gate"]["checks"] if results else []
check(code == 0 and len(checks) == 1 and checks[0]["comparison"] == "paired"
      and checks[0]["examples"] == 4 and checks[0]["passed"],
      f"an identical run is paired over tiny's 4 examples and passes: exit {code}: {checks} "
      f"{err[-1500:]}")
code, err, _, _ = gate_run("mcnemar", pin + "mcnemar_p: {tasks/tiny.multiple_choice_grade: 0.05}")
check(code == 2 and "mcnemar_p: tasks/tiny.multiple_choice_grade is not a 0/1 metric" in err,
      f"mcnemar_p on a grade with partial credit: exit 2: {code} {err[-1500:]}")

# bad names and files: exit 2, one message naming them, no results written
for tasks, message in [
        ("tinny", "unknown BIG-bench task 'tinny' (the closest: 'tiny')"),
        ("nowhere/task.yaml", "nowhere/task.yaml"),
        (os.path.join(HERE, "bigbench", "malformed.json"), "malformed.json:"),
]:
    code, out, err, _ = session.evalmesh(["eval", "-m", MODEL, "--tasks", tasks])
    run_dir = os.path.join(session.tmp, f"run{session.runs}")
    check_equal(code, 2, f"--tasks {tasks}: exit status")
    check(message in err, f"--tasks {tasks}: the message names it", err)
    check(not os.path.exists(os.path.join(run_dir, "lm_eval_results.json")),
          f"--tasks {tasks}: no results written")

# a generate_until task (lm-eval's gsm8k shape: 2 shots, a regex filter, exact_match with
# regexes_to_ignore) is decoded and scored: its exact_match is the mean of the samples'
code, out, err, _ = session.evalmesh(["eval", "-m", MODEL, "--log-samples", "--gen-kwargs",
                                      "max_gen_toks=16", "--tasks",
                                      os.path.join(HERE, "data", "lm_eval", "gsm_like.yaml")])
run_dir = os.path.join(session.tmp, f"run{session.runs}")
check_equal(code, 0, "generate_until task gsm_like: exit status")
if code == 0:
    lines = [json.loads(line) for line in open(os.path.join(run_dir, "samples_gsm_like.jsonl"))]
    matches = [line["exact_match"] for line in lines]
    result = json.load(open(os.path.join(run_dir, "lm_eval_results.json")))["results"]["gsm_like"]
    check(len(lines) > 1 and all(line["arguments"][0][1]["max_gen_toks"] == 16 for line in lines)
          and result["exact_match,strict-match"] == math.fsum(matches) / len(matches),
          "gsm_like: exact_match is the mean of the samples' (max_gen_toks 16)", str(result))
session.finish()
