"""The task stage's exactness on the real tiny model (stories260K from ../shared/data; skipped
without it) over a small lm-eval-style multiple-choice task with 2 shots (ranks/stories_mc.yaml):
lm_eval_results.json, the example file (per-example values for the gate), every samples line and
results.json's metrics are byte-identical on 1, 2 and 3 ranks (mpirun), with batches of requests (batch_tokens 100000: every request of a rank in
one batch) and on 2 threads; tp = 2 gives the same bytes on dp 1 and dp 2 and is within 1e-5
(relative) of tp = 1; each example's context is computed once for its choices (the log's
positions computed against the requests'); a resume on another world size takes every recorded
request (and after a records file lost its second half, computes the rest) to the same bytes; the
request records hold each continuation's exact scores (sum of -nll equal to the samples'
loglik)."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from eval_helpers import BIN, MPIRUN, EvalSession, shared_files  # noqa: E402
from checks import check  # noqa: E402

(MODEL,) = shared_files("models/stories260K.gguf")
TASK = os.path.join(HERE, "ranks", "stories_mc.yaml")
session = EvalSession("task_ranks_")


def outputs(run_dir):
    """{file name: bytes} of lm_eval_results.json, the example file and the samples files, and
    results.json's metrics without timings."""
    out = {}
    for path in [os.path.join(run_dir, "lm_eval_results.json"),
                 os.path.join(run_dir, "examples_tasks.json"),
                 *glob.glob(os.path.join(run_dir, "samples_*.jsonl"))]:
        with open(path, "rb") as f:
            out[os.path.basename(path)] = f.read()
    with open(os.path.join(run_dir, "results.json")) as f:
        out["metrics"] = {k: v for k, v in json.load(f)["metrics"].items()
                          if not v.get("timing")}
    return out


def run(args, np=None, label=""):
    """Runs evalmesh (under mpirun -np when np is given); returns its run directory and output."""
    code, out, err, _ = session.evalmesh(args, np)
    check(code == 0, f"{label}: exit {code}: {err[-2000:]}")
    return os.path.join(session.tmp, f"run{session.runs}"), SimpleNamespace(stdout=out, stderr=err)


EVAL = ["eval", "-m", MODEL, "--tasks", TASK, "--log-samples", "-t", "1"]
base_dir, p = run(EVAL, label="1 rank")
base = outputs(base_dir)
check("|stories_mc|1.0|none|2|acc|" in p.stdout, f"lm-eval's table printed: {p.stdout!r}")
samples = [json.loads(line) for line in base["samples_stories_mc.jsonl"].splitlines()]
check(len(samples) == 30, f"30 samples lines, not {len(samples)}")
acc = sum(s["acc"] for s in samples) / len(samples)
results = json.loads(base["lm_eval_results.json"])["results"]["stories_mc"]
check(results["acc,none"] == acc, f"acc {results['acc,none']} is the samples' mean {acc}")
check(all(len(s["resps"]) == 3 and len(s["arguments"]) == 3 for s in samples), "3 choices each")
# each example's context computed once, its 3 choices scored as continuations of it (the cpu
# backend's shared prefix): 3042 positions computed for the 90 requests' 8548
counts = re.findall(r"task tasks: 30 of 30 examples on this rank, (\d+) positions computed for "
                    r"requests of (\d+) positions", p.stderr)
check(counts == [("3042", "8548")],
      f"3042 positions computed for requests of 8548 (the contexts once): {counts}")

for label, args, np in [("2 ranks", EVAL, 2), ("3 ranks", EVAL, 3),
                        ("batches", EVAL + ["--batch-tokens", "100000"], None),
                        ("2 threads", [a if a != "1" else "2" for a in EVAL], None)]:
    run_dir, _ = run(args, np, label)
    check(outputs(run_dir) == base, f"{label}: the same bytes as 1 rank")

# tp = 2 through recipes of their own: DESIGN.md's rule for tp, the same bits on any dp for a
# given tp (dp 1 and dp 2), and within a stated tolerance of tp = 1 (its sums are split)
def tp_run(dp):
    recipe = session.write(f"tp_dp{dp}.yaml", f"""
name: tp
stages:
  model: {{kind: model, path: "{MODEL}"}}
  grid: {{kind: mesh, dp: {dp}, tp: 2}}
  tasks: {{kind: task, model: model, mesh: grid, tasks: ["{TASK}"], log_samples: true, threads: 1}}
  report: {{kind: report, metrics: tasks, outputs: [json]}}
""")
    tp_dir, _ = run(["run", recipe], 2 * dp, f"tp 2, dp {dp}")
    return outputs(tp_dir)


tp1, tp2 = tp_run(1), tp_run(2)
check(tp1 == tp2, "tp 2: dp 1 and dp 2 give the same bytes")
tp_samples = [json.loads(line) for line in tp1["samples_stories_mc.jsonl"].splitlines()]
worst = max(abs(a[0] - b[0]) / max(1.0, abs(a[0])) for s, t in zip(samples, tp_samples)
            for a, b in zip(s["resps"], t["resps"]))
check(len(tp_samples) == len(samples) and worst < 1e-5,
      f"tp 2: every log-likelihood within 1e-5 relative of tp 1 (largest {worst:.3g})")
check([s["acc"] for s in tp_samples] == [s["acc"] for s in samples],
      "tp 2: the same acc per document")

# resume: every request taken from the records, on 3 ranks
copy = os.path.join(session.tmp, "resumed")
shutil.copytree(base_dir, copy)
for f in glob.glob(os.path.join(copy, "lm_eval_results.json")) + glob.glob(
        os.path.join(copy, "samples_*")) + glob.glob(os.path.join(copy, "examples_*")):
    os.remove(f)
env = dict(os.environ)
p = subprocess.run([MPIRUN, "-np", "3", "--allow-run-as-root", "--oversubscribe", BIN, "eval",
                    "--resume", copy], capture_output=True, text=True, timeout=600, env=env)
check(p.returncode == 0, f"resume on 3 ranks: exit {p.returncode}: {p.stderr[-1500:]}")
taken = sum(int(m) for m in re.findall(r"task tasks: (\d+) requests taken from the run's records",
                                         p.stderr))
check(taken == 90, f"the resume took all 90 requests from the records, not {taken}: "
      f"{p.stderr[-1500:]}")
check(outputs(copy) == base, "resume on 3 ranks: the same bytes as the whole run")

# a records file cut in half: the rest is computed again to the same bytes
records = glob.glob(os.path.join(copy, "records", "tasks.rank0.*.bin"))
check(len(records) >= 1, f"request records written: {records}")
largest = max(records, key=os.path.getsize)  # the first run's: every request
with open(largest, "r+b") as f:
    f.truncate(os.path.getsize(largest) // 2)
p = subprocess.run([MPIRUN, "-np", "2", "--allow-run-as-root", "--oversubscribe", BIN, "eval",
                    "--resume", copy], capture_output=True, text=True, timeout=600, env=env)
check(p.returncode == 0, f"resume after damage: exit {p.returncode}: {p.stderr[-1500:]}")
check(outputs(copy) == base, "resume after losing half the records: the same bytes")

session.finish()
