"""GPU end-to-end (ctest label gpu): recipes/demo.yaml run through `evalmesh run` three ways on one
rank: as written (device cpu, mesh local), with the forward on the GPU (device cuda), and with the
forward on the GPU over an NCCL world of one rank (mesh backend nccl, tp = 1), so the aggregate's
exact sums go through NCCL's integer all-reduce (host buffers staged). The demo model is F16 (the
GPU multiplies in F16 with FP32 accumulation): token perplexity within 1e-2 relative of the CPU's,
token and window counts equal, and the two GPU runs' perplexities bit-identical (the backend of the
aggregate does not change a sum). Also `evalmesh bench-comm --backend nccl` on one rank reports no
wrong element. Exit 77 (skipped) with the reason when no CUDA device is usable.
Usage: test_gpu_recipe.py CUDA_FORWARD_CHECK"""
import json
import os
import subprocess
import sys
import tempfile

BIN = os.environ["EVALMESH_BIN"]
SRC = os.environ["EVALMESH_SOURCE_DIR"]
DEMO = os.path.join(SRC, "recipes", "demo.yaml")

probe = subprocess.run([sys.argv[1], "--probe"], capture_output=True, text=True)
if probe.returncode == 77:
    print(probe.stdout.strip())
    sys.exit(77)

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


def metrics(overrides):
    with tempfile.TemporaryDirectory() as tmp:
        rd = os.path.join(tmp, "rd")
        r = subprocess.run([BIN, "run", DEMO, "--run-dir", rd] + overrides, cwd=tmp,
                           capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            check(False, f"run {overrides}: exit {r.returncode}: {r.stderr[-2000:]}")
            return None
        return json.load(open(os.path.join(rd, "results.json")))["metrics"]["ppl"]


cpu = metrics([])
gpu = metrics(["stages.ppl.device=cuda"])
nccl = metrics(["stages.ppl.device=cuda", "stages.mesh.backend=nccl", "stages.mesh.tp=1"])
if cpu and gpu and nccl:
    a, b, c = (m["token_ppl"]["value"] for m in (cpu, gpu, nccl))
    check(abs(b - a) / a <= 1e-2, f"token_ppl cpu {a!r} cuda {b!r} (rel {abs(b - a) / a:.3g})")
    check(b == c, f"token_ppl cuda over local {b!r} == over nccl {c!r}")
    for key in ("tokens", "windows", "words", "bytes"):
        check(cpu[key]["value"] == gpu[key]["value"] == nccl[key]["value"], f"{key} equal")

r = subprocess.run([BIN, "bench-comm", "--backend", "nccl", "-b", "8", "-e", "1M", "--iters", "5",
                    "--warmup", "1", "--op", "all", "--timeout", "60"], capture_output=True,
                   text=True, timeout=120)
print(r.stdout[-3000:])
check(r.returncode == 0, f"bench-comm --backend nccl on one rank: exit {r.returncode} {r.stderr}")

sys.exit(1 if failures else 0)
