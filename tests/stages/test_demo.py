"""recipes/demo.yaml needs nothing outside the repository: its model file is what the
evalmesh-mkmodel command in the recipe's comment makes, and the run gives the same exact metrics
on 1 and 2 ranks (and, without mpirun, at least runs on one); a passing gate is reported once,
by rank 0.

Usage: test_demo.py PATH_TO_evalmesh-mkmodel"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402

BIN = os.environ["EVALMESH_BIN"]
SOURCE = os.environ["EVALMESH_SOURCE_DIR"]
MPIRUN = os.environ.get("EVALMESH_MPIRUN", "")
MKMODEL = sys.argv[1]
recipe = os.path.join(SOURCE, "recipes", "demo.yaml")
tmp = tempfile.mkdtemp(prefix="eval_demo_")

# The model file is reproducible from the command in the recipe's comment.
text = open(recipe).read()
m = re.search(r"#   evalmesh-mkmodel (.*?)\n#     (.*?)\n", text)
args = (m.group(1).rstrip(" \\") + " " + m.group(2)).split()
out_index = args.index("--out") + 1
committed = os.path.join(SOURCE, args[out_index])
args[out_index] = os.path.join(tmp, "demo-model.gguf")
subprocess.run([MKMODEL, *args], check=True)
check(open(committed, "rb").read() == open(args[out_index], "rb").read(), "model reproducible")


def run(np, *overrides, tag=""):
    run_dir = os.path.join(tmp, f"run{tag}{np}")
    # with a gate that passes: every rank checks it, rank 0 alone says so
    cmd = [BIN, "run", recipe, "--run-dir", run_dir, "--log-level", "info",
           "stages.g={kind: gate, metrics: metrics, after: [report], max: {ppl.token_ppl: 1e9}}",
           *overrides]
    env = dict(os.environ)
    if np > 1:
        cmd = [MPIRUN, "-np", str(np), "--allow-run-as-root", "--oversubscribe", *cmd]
        if "ASAN_OPTIONS" in env:  # see test_e2e.py
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    check(p.returncode == 0, f"demo np={np} rc", p.stderr[-2000:])
    check(p.stderr.count("gate 'g': 1 checks passed") == 1, f"demo np={np} gate passed once",
          p.stderr[-2000:])
    path = os.path.join(run_dir, "results.json")
    if not os.path.exists(path):
        return None
    metrics = json.load(open(path))["metrics"]["ppl"]
    return {k: v for k, v in metrics.items() if not v.get("timing")}


one = run(1)
if one:
    check(100 < one["token_ppl"]["value"] < 2000, "demo ppl", str(one["token_ppl"]))
    fables = [p.strip("\n") for p in open(os.path.join(SOURCE, "recipes", "data", "demo.txt")).read().split("\n\n")]
    check(one["words"]["value"] == sum(len(re.split(r"\s+", f)) for f in fables), "demo documents")
if MPIRUN and one:
    check(run(2) == one, "demo 2 ranks identical")

# tools/demo's real model: SmolLM2-135M (tools/fetch-smollm2; skipped offline) on the same
# fables: the figures the README shows, the same on 1 and 2 ranks.
fetch = subprocess.run([os.path.join(SOURCE, "tools", "fetch-smollm2")], capture_output=True,
                       text=True)
if fetch.returncode != 0:
    print("SmolLM2 part skipped: tools/fetch-smollm2 could not fetch it: " + fetch.stderr.strip())
else:
    model = "stages.model.path=" + fetch.stdout.strip()
    real = run(1, model, tag="smollm2-")
    if real:
        # the bits do not depend on the CPU, threads or ranks, so the value is pinned
        check(abs(real["token_ppl"]["value"] - 22.04758441955599) < 1e-9,
              "SmolLM2 demo token_ppl", str(real["token_ppl"]))
        check(real["tokens"]["value"] == 875 and abs(real["token_accuracy"]["value"] -
                                                     0.39657143) < 1e-8,
              "SmolLM2 demo tokens and accuracy", str(real))
    if MPIRUN and real:
        check(run(2, model, tag="smollm2-") == real, "SmolLM2 demo 2 ranks identical")
sys.exit(finish())
