"""Diagnostics with real ranks under mpirun: bench-comm (#wrong 0 at every size on 4 ranks),
test-network (every pair of 3 ranks measured), check-env --distributed, and the env_check stage
stopping every rank with the failing check named per rank (exit 4)."""
import json
import os
import subprocess
import sys
import tempfile

BIN = os.environ["EVALMESH_BIN"]
MPIRUN = os.environ.get("EVALMESH_MPIRUN", "")
if not MPIRUN:
    print("SKIPPED: mpirun not found")
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402


def mpirun(n, *args):
    cmd = [MPIRUN, "--oversubscribe", "-np", str(n), BIN, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    return p.returncode, p.stdout, p.stderr


# bench-comm on 4 ranks: every size of every collective checked exactly.
code, out, err = mpirun(4, "bench-comm", "-b", "8", "-e", "1M", "-f", "4", "--iters", "3",
                        "--warmup", "1", "--json")
check(code == 0, f"bench-comm exit {code}: {err}")
doc = json.loads(out)
check(doc["ranks"] == 4 and doc["backend"] == "mpi", f"header {doc.get('ranks')}")
sizes = sorted({r["bytes"] for r in doc["results"] if r["op"] == "allreduce"})
check(sizes == [8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288], f"sizes {sizes}")
check(len(doc["results"]) == 3 * len(sizes), f"{len(doc['results'])} rows")
check(all(r["wrong"] == 0 for r in doc["results"]), "#wrong is 0 everywhere")
for r in doc["results"]:
    factor = {"allreduce": 2 * 3 / 4, "allgather": 3 / 4, "broadcast": 1.0}[r["op"]]
    # both printed with 6 decimals
    check(abs(r["busbw_gbs"] - r["algbw_gbs"] * factor) <= 2e-6,
          f"busbw formula {r}")
code, out, err = mpirun(2, "bench-comm", "-e4K", "--iters=2")
check(code == 0 and "# Avg bus bandwidth    :" in out.splitlines()[-1], f"text output {out[-200:]}")
code, out, err = mpirun(3, "bench-comm", "-e", "64K", "-f", "8", "--iters", "2", "--hierarchical",
                        "--json")
doc = json.loads(out) if code == 0 else {"results": []}
check(code == 0 and doc["hierarchical"] and len(doc["results"]) == 5, f"hierarchical: {err}")
check(all(r["op"] == "allreduce" and r["wrong"] == 0 for r in doc["results"]), "hierarchical #wrong")
code, out, err = mpirun(2, "bench-comm", "--hierarchical", "--op", "broadcast")
check(code == 2 and "--hierarchical measures all-reduce only" in err, f"hierarchical op: {err}")
# nccl: real GPU buffers where a GPU is visible, else the documented error on every rank.
gpu = subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode == 0
code, out, err = mpirun(2, "bench-comm", "--backend", "nccl", "-e", "64K", "--iters", "2")
if gpu:
    check(code == 0 and "#wrong" in out, f"nccl on a GPU machine: {err}")
else:
    check(code == 4 and "nccl backend: no CUDA device visible on rank" in err, f"nccl: {err}")
code, out, err = mpirun(1, "bench-comm", "-e", "lots")
check(code == 2 and "'lots' is not a size like 8, 64K or 256M" in err, f"bad size: {err}")

# test-network between 3 ranks: 3 links, every one measured.
code, out, err = mpirun(3, "test-network", "--ranks", "--size=64K", "--iters=3", "--json")
check(code == 0, f"test-network exit {code}: {err}")
doc = json.loads(out)
links = {(l["a"], l["b"]) for l in doc["links"]}
check(links == {(0, 1), (0, 2), (1, 2)}, f"links {links}")
check(all(l["rtt_us"] > 0 and l["bw_gbs"] > 0 for l in doc["links"]), "measured links")
code, out, err = mpirun(4, "test-network", "--size", "16K", "--iters", "2")
check(code == 0 and "slowest links:" in out and "rank 0 <-> rank" in out, f"text: {out}")
code, out, err = mpirun(1, "test-network")
check(code == 2 and "nothing to test" in err, f"one rank: {err}")

# check-env --distributed: 2 ranks on this node, same environment.
code, out, err = mpirun(2, "check-env", "--distributed")
check(code == 0, f"check-env --distributed exit {code}: {err}")
check("2 ranks on 1 nodes" in out and "0 ranks differ from rank 0, 0 ranks fail a check" in out,
      f"distributed summary: {out[-300:]}")
code, out, err = mpirun(2, "check-env", "--distributed", "--json")
doc = json.loads(out) if code == 0 else {}
check(code == 0 and doc.get("ranks") == 2 and doc.get("nodes") == 1 and doc.get("differing") == 0
      and [(r["rank"], r["same_as_rank0"]) for r in doc.get("per_rank", [])] == [(0, True), (1, True)]
      and doc["rank0"]["failures"] == 0 and len(doc["rank0"]["checks"]) >= 9,
      f"check-env --distributed --json: {code} {out[:300]} {err}")

# env_check stage: an impossible kernel requirement stops both ranks with exit 4, naming both.
with tempfile.TemporaryDirectory() as d:
    recipe = os.path.join(d, "env.yaml")
    with open(recipe, "w") as f:
        f.write('name: envtest\nstages:\n  env: {kind: env_check, require: {kernel: ">=99", '
                'min_memory_gb: 0.01}}\n')
    code, out, err = mpirun(2, "run", recipe, "--run-dir", os.path.join(d, "run1"))
    check(code == 4, f"env_check failing exit {code}: {err}")
    check("environment requirements not met" in err, f"message: {err}")
    for r in (0, 1):
        check(f"rank {r}: kernel: " in err and "does not satisfy >=99" in err, f"rank {r} named")
    with open(recipe, "w") as f:
        f.write('name: envtest\nstages:\n  env: {kind: env_check, require: {kernel: ">=4.15", '
                'same_environment: true}}\n')
    code, out, err = mpirun(2, "run", recipe, "--run-dir", os.path.join(d, "run2"))
    check(code == 0, f"env_check passing exit {code}: {err}")
    # check-state on the real run directories: the passing run is all done, the failed one not
    p = subprocess.run([BIN, "check-state", os.path.join(d, "run2")], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.splitlines()[-1] == "2 ranks: 0 silent, 0 behind, 0 failed",
          f"check-state run2: {p.stdout}{p.stderr}")
    p = subprocess.run([BIN, "check-state", os.path.join(d, "run1")], capture_output=True, text=True)
    check(p.returncode == 5 and p.stdout.splitlines()[-1] == "2 ranks: 0 silent, 0 behind, 2 failed",
          f"check-state run1: {p.stdout}{p.stderr}")
    with open(recipe, "w") as f:
        f.write('name: envtest\nstages:\n  env: {kind: env_check, require: {kernel: "newest"}}\n')
    code, out, err = mpirun(1, "validate", recipe)
    check(code == 2 and "env.yaml:3:" in err and "kernel" in err, f"bad requirement: {err}")

sys.exit(finish())
