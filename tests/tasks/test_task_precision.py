"""The task stage's `precision` (issues 24 and 25) on the real tiny model (stories260K from
../shared/data; skipped without it) quantized to Q8_0 here (a quantize stage writing q8.gguf, its
output head too), over the committed multiple-choice task ranks/stories_mc.yaml:
  (a) `evalmesh eval --precision ggml` on q8.gguf: results.json records precision ggml and the
      log names it and its kernel; its log-likelihoods differ from those of precision exact on
      the same file, and its outputs (lm_eval_results.json, the example file, the samples file,
      results.json's metrics) are the same bytes on 1 and on 2 ranks; on the F32 model, whose
      matrices ggml leaves exact, the same bytes as exact; `--precision bf16` is recorded as
      bf16, its log names its kernel, and its log-likelihoods differ from exact's on 1 rank and
      are the same bytes on 2;
  (b) --precision fast: exit 2 naming the option and its values;
  (c) a resume whose records were written with another precision: exit 2, naming both (the task
      stage's request records and the forward stage's window records); a resume after the run's
      recipe changed its precision: exit 2, the recipe check quoting both lines; records of the
      format before the key held the precision (EMWREC01) are computed again, saying so; a bf16
      run resumed from exact's records is refused the same way;
  (d) a gate pinned to a baseline of another precision (ggml, bf16): exit 2, naming both; `unpaired: allow`
      compares unpaired and says why; a baseline of the same precision pairs (difference 0)."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from eval_helpers import BIN, MPIRUN, EvalSession, shared_files  # noqa: E402
from checks import check  # noqa: E402

MODEL, TEXT = shared_files("models/stories260K.gguf", "text/tinystories_sample.txt")
TASK = os.path.join(HERE, "ranks", "stories_mc.yaml")
session = EvalSession("task_precision_")


def outputs(run_dir):
    """{file name: bytes} of lm_eval_results.json, the example file and the samples file, and
    results.json's metrics without timings."""
    out = {}
    for name in ["lm_eval_results.json", "examples_tasks.json", "samples_stories_mc.jsonl"]:
        with open(os.path.join(run_dir, name), "rb") as f:
            out[name] = f.read()
    with open(os.path.join(run_dir, "results.json")) as f:
        out["metrics"] = {k: v for k, v in json.load(f)["metrics"].items()
                          if not v.get("timing")}
    return out


def evalmesh(args, np=None):
    """(exit status, stderr, run directory, results.json or None) of one evalmesh run."""
    rc, _, err, results = session.evalmesh(args, np)
    return rc, err, os.path.join(session.tmp, f"run{session.runs}"), results


def resps(run_dir):
    with open(os.path.join(run_dir, "samples_stories_mc.jsonl")) as f:
        return [[r[0] for r in json.loads(line)["resps"]] for line in f]


# q8.gguf: stories260K's matrices in Q8_0 (those whose rows 32 does not divide in F16)
recipe = session.write("quantize.yaml", f"""name: q8
stages:
  model: {{kind: model, path: "{MODEL}"}}
  q8: {{kind: quantize, model: model, scheme: Q8_0, output: true, gguf: q8.gguf}}
  tasks: {{kind: task, model: q8, tasks: ["{TASK}"], threads: 1}}
  report: {{kind: report, metrics: tasks, outputs: [json]}}
""")
rc, err, q8_dir, _ = evalmesh(["run", recipe])
check(rc == 0, f"quantizing: exit {rc}", err[-2000:])
Q8 = os.path.join(q8_dir, "q8.gguf")

EVAL = ["eval", "--tasks", TASK, "--log-samples", "-t", "1"]

# (a) exact and ggml on q8.gguf; ggml on 2 ranks
rc, err, exact_dir, exact = evalmesh(EVAL + ["-m", Q8])
check(rc == 0 and exact and exact["model"]["precision"] == "exact",
      f"exact: exit {rc}, precision recorded", err[-2000:])
rc, err, ggml_dir, ggml = evalmesh(EVAL + ["-m", Q8, "--precision", "ggml"])
check(rc == 0 and ggml and ggml["model"]["precision"] == "ggml",
      f"ggml: exit {rc}, precision recorded", err[-2000:])
check(re.search(r"task tasks: 30 of 30 examples on this rank, .*precision ggml, kernel \w+\)",
                err) is not None, "ggml: the log names the precision and its kernel", err[-2000:])
a, b = resps(exact_dir), resps(ggml_dir)
differ = sum(x != y for ra, rb in zip(a, b) for x, y in zip(ra, rb))
worst = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
print(f"ggml vs exact on Q8_0: {differ} of 90 log-likelihoods differ, by {worst:.3g} at most")
check(len(a) == len(b) == 30 and differ > 45 and 0 < worst < 0.5,
      f"ggml's log-likelihoods differ from exact's, slightly ({differ} of 90, {worst:.3g})")
if MPIRUN:
    rc, err, ggml2_dir, _ = evalmesh(EVAL + ["-m", Q8, "--precision", "ggml"], np=2)
    check(rc == 0, f"ggml on 2 ranks: exit {rc}", err[-2000:])
    check(outputs(ggml2_dir) == outputs(ggml_dir), "ggml: the same bytes on 1 and 2 ranks")
else:
    print("note: mpirun not found; ggml on 2 ranks is skipped")
rc, err, bf16_dir, bf16 = evalmesh(EVAL + ["-m", Q8, "--precision", "bf16"])
check(rc == 0 and bf16 and bf16["model"]["precision"] == "bf16",
      f"bf16: exit {rc}, precision recorded", err[-2000:])
check(re.search(r"task tasks: 30 of 30 examples on this rank, .*precision bf16, kernel "
                r"(avx512bf16|avx512|c)\)", err) is not None,
      "bf16: the log names the precision and its kernel", err[-2000:])
differ = sum(x != y for ra, rb in zip(a, resps(bf16_dir)) for x, y in zip(ra, rb))
print(f"bf16 vs exact on Q8_0: {differ} of 90 log-likelihoods differ")
check(differ > 45, f"bf16's log-likelihoods differ from exact's ({differ} of 90)")
if MPIRUN:
    rc, err, bf16_2_dir, _ = evalmesh(EVAL + ["-m", Q8, "--precision", "bf16"], np=2)
    check(rc == 0 and outputs(bf16_2_dir) == outputs(bf16_dir),
          f"bf16: the same bytes on 1 and 2 ranks (exit {rc})", err[-2000:])
rc, err, f32_exact_dir, _ = evalmesh(EVAL + ["-m", MODEL])
rc2, err2, f32_ggml_dir, _ = evalmesh(EVAL + ["-m", MODEL, "--precision", "ggml"])
check(rc == 0 and rc2 == 0 and outputs(f32_exact_dir) == outputs(f32_ggml_dir),
      "F32 model: ggml gives exact's bytes", (err + err2)[-2000:])

# (b) an unknown precision
rc, err, _, _ = evalmesh(EVAL + ["-m", Q8, "--precision", "fast"])
check(rc == 2 and "stage 'tasks': option 'precision' must be one of exact, ggml, bf16, got "
      "'fast'" in err,
      f"--precision fast: exit {rc}", err[-1500:])

# (c) resuming a ggml run from records written by an exact one
copy = os.path.join(session.tmp, "mixed")
shutil.copytree(ggml_dir, copy)
shutil.rmtree(os.path.join(copy, "records"))
shutil.copytree(os.path.join(exact_dir, "records"), os.path.join(copy, "records"))
written = sorted(glob.glob(os.path.join(copy, "records", "tasks.rank0.*.bin")))
rc, _, err, _ = session.evalmesh(["eval", "--resume", copy])
check(rc == 2 and written and f"resume refused: the precision changed since the run wrote "
      f"{written[0]} (its precision then exact, now ggml)" in err,
      f"resume with records of another precision: exit {rc}", err[-1500:])

copy = os.path.join(session.tmp, "mixed_bf16")
shutil.copytree(bf16_dir, copy)
shutil.rmtree(os.path.join(copy, "records"))
shutil.copytree(os.path.join(exact_dir, "records"), os.path.join(copy, "records"))
written = sorted(glob.glob(os.path.join(copy, "records", "tasks.rank0.*.bin")))
rc, _, err, _ = session.evalmesh(["eval", "--resume", copy])
check(rc == 2 and written and f"resume refused: the precision changed since the run wrote "
      f"{written[0]} (its precision then exact, now bf16)" in err,
      f"bf16 resume with records of precision exact: exit {rc}", err[-1500:])


# records of the format before the precision was in the key: computed again, saying so
copy = os.path.join(session.tmp, "old_format")
shutil.copytree(ggml_dir, copy)
(old,) = glob.glob(os.path.join(copy, "records", "tasks.rank0.*.bin"))
with open(old, "r+b") as f:
    f.write(b"EMWREC01")
rc, _, err, _ = session.evalmesh(["eval", "--resume", copy])
check(rc == 0 and f"window records {old}: written by an older evalmesh (format EMWREC01, without "
      "the precision); its windows are computed again" in err and
      "task tasks: 0 requests taken from the run's records" in err and
      outputs(copy) == outputs(ggml_dir), f"records of the older format: exit {rc}", err[-1500:])


# ... and the same for the forward stage's window records (the records key they share)
def forward_run(precision):
    recipe = session.write(f"forward_{precision}.yaml", f"""name: forward
stages:
  model: {{kind: model, path: "{Q8}"}}
  chunks: {{kind: dataset, tokenizer: model, path: "{TEXT}", protocol: chunked, n_ctx: 32,
           max_windows: 8}}
  f: {{kind: forward, model: model, data: chunks, threads: 1, precision: {precision}}}
  agg: {{kind: aggregate, inputs: [f]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")
    rc, err, run_dir, _ = evalmesh(["run", recipe])
    check(rc == 0, f"forward, precision {precision}: exit {rc}", err[-1500:])
    return run_dir


forward_exact, forward_ggml = forward_run("exact"), forward_run("ggml")
shutil.rmtree(os.path.join(forward_ggml, "records"))
shutil.copytree(os.path.join(forward_exact, "records"), os.path.join(forward_ggml, "records"))
written = sorted(glob.glob(os.path.join(forward_ggml, "records", "f.rank0.*.bin")))
p = subprocess.run([BIN, "run", "--resume", forward_ggml], capture_output=True, text=True,
                   timeout=600)
check(p.returncode == 2 and written and f"resume refused: the precision changed since the run "
      f"wrote {written[0]} (its precision then exact, now ggml)" in p.stderr,
      f"forward: resume with records of another precision: exit {p.returncode}",
      p.stderr[-1500:])


# ... and the run's own recipe edited to another precision: the recipe check names both lines
def plain(precision):
    return session.write("plain.yaml", f"""name: plain
stages:
  model: {{kind: model, path: "{Q8}"}}
  tasks: {{kind: task, model: model, tasks: ["{TASK}"], threads: 1, precision: {precision}}}
  report: {{kind: report, metrics: tasks, outputs: [json]}}
""")


rc, err, plain_dir, _ = evalmesh(["run", plain("exact")])
check(rc == 0, f"a recipe's run: exit {rc}", err[-1500:])
plain("ggml")
p = subprocess.run([BIN, "run", "--resume", plain_dir], capture_output=True, text=True,
                   timeout=600)
check(p.returncode == 2 and re.search(r"resume refused: the recipe changed: .* \(first difference "
                                      r"at line \d+: `precision: exact` then, `precision: ggml` "
                                      r"now\)", p.stderr) is not None,
      f"resume after the recipe's precision changed: exit {p.returncode}", p.stderr[-1500:])


# (d) the gate
def gated(precision, baseline_dir, extra=""):
    recipe = session.write(f"gate_{session.runs}.yaml", f"""name: gate
stages:
  model: {{kind: model, path: "{Q8}"}}
  tasks: {{kind: task, model: model, tasks: ["{TASK}"], threads: 1, precision: {precision}}}
  gate: {{kind: gate, metrics: tasks, baseline: {{pin: "{baseline_dir}"}},
         max_decrease_sigma: {{tasks/stories_mc.acc: 3}}{extra}}}
  report: {{kind: report, metrics: tasks, verdict: gate, outputs: [json]}}
""")
    return evalmesh(["run", recipe])


rc, err, _, _ = gated("ggml", exact_dir)
check(rc == 2 and f"stage 'gate': refusing to compare with the baseline {exact_dir}" in err and
      "the precision differs (exact in the baseline, ggml in this run)" in err,
      f"gate across precisions: exit {rc}", err[-1500:])
rc, err, _, _ = gated("bf16", exact_dir)
check(rc == 2 and "the precision differs (exact in the baseline, bf16 in this run)" in err,
      f"gate of bf16 against exact: exit {rc}", err[-1500:])
rc, err, _, res = gated("exact", ggml_dir, ", unpaired: allow")
check(rc in (0, 3) and res and res["gate"]["checks"][0]["comparison"] != "paired" and
      "unpaired comparison: the precision differs (ggml in the baseline, exact in this run) "
      "(unpaired: allow)" in err, f"gate across precisions, unpaired: allow: exit {rc}",
      err[-1500:])
rc, err, _, res = gated("ggml", ggml_dir)
check(rc == 0 and res and res["gate"]["checks"][0]["comparison"] == "paired" and
      res["gate"]["checks"][0]["difference"] == 0, f"gate of the same precision: exit {rc}, "
      "paired, difference 0", err[-1500:])

session.finish()
