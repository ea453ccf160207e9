"""GPU tests of tensor and context parallelism on the cuda forward (ctest label gpu; tools/gpu-check
runs it on one H200): every split runs as processes under mpirun sharing the one GPU (mesh backend
mpi: NCCL refuses two ranks of a communicator on one device).

Per token, through forward_mesh_driver (seeded windows of T positions, the mesh's tp and cp groups),
on FP32-weight models, so the GPU multiplies in FP32 and only the order of sums differs:
  - stories260K (../shared/data, all 48 tensors F32) when present,
  - an evalmesh-mkmodel qwen2 model (GQA, Q/K/V biases, untied head),
  - an evalmesh-mkmodel gemma2 model (sliding window shorter than a cp block, soft-capped scores
    and logits, post-norms, GeGLU, tied head),
  - an evalmesh-mkmodel gemma3 model (the sliding layers' own RoPE base and linear scaling, at a
    cp rank's positions; head_dim 24, so part of each warp's lanes idle);
each with device cuda at tp = 1 (one process), tp = 2 (not gemma3), cp = 2 (two processes) and,
for gemma2, tp = 2 x cp = 2 (four processes, twice), and with device cpu at tp = 1. Checks:
  - cuda tp = 1 against cpu tp = 1: per token |nll difference| / max(1, |nll|) <= CPU_TOL (1e-3,
    cuda_forward_check's FP32 tolerance);
  - every cuda tp and cp against cuda tp = 1: per token <= SPLIT_TOL (1e-4; tp reorders the sums of
    Wo and Wdown, cp those of attention's online softmax), the argmax the same on >= 99% of
    positions, the windows' perplexity within PPL_TOL (1e-5) relative;
  - a repeated tp = 2 x cp = 2 run bit-identical;
  - each tp = 2 rank's device weights at most half the whole plus the token embedding (uploaded
    whole on every rank) plus 2% (norms).
End to end, recipes/demo.yaml (an F16 model: the GPU's GEMM inputs are rounded to F16) run by
`evalmesh run` with the forward on the GPU at tp = 1, and under `mpirun -np 2` with tp = 2 and
with cp = 2 (mesh backend mpi): token perplexity within RECIPE_SPLIT_TOL (1e-3) relative of cuda
tp = 1 and within RECIPE_CPU_TOL (1e-2, test_gpu_recipe's) of the cpu backend's, token, window,
word and byte counts equal.
Exit 77 (skipped) with the reason when no CUDA device is usable or mpirun is missing.
Usage: test_gpu_mesh.py CUDA_FORWARD_CHECK FORWARD_MESH_DRIVER MKMODEL MPIRUN"""
import json
import math
import os
import subprocess
import sys
import tempfile

CPU_TOL = 1e-3
SPLIT_TOL = 1e-4
PPL_TOL = 1e-5
ARGMAX_AGREE = 0.99
RECIPE_SPLIT_TOL = 1e-3
RECIPE_CPU_TOL = 1e-2
T, SCORE_FROM, WINDOWS, SEED = 64, 8, 2, 11

check_bin, driver, mkmodel = sys.argv[1], sys.argv[2], sys.argv[3]
mpirun = sys.argv[4] if len(sys.argv) > 4 else ""
BIN = os.environ["EVALMESH_BIN"]
DEMO = os.path.join(os.environ["EVALMESH_SOURCE_DIR"], "recipes", "demo.yaml")
shared = os.environ.get("EVALMESH_SHARED_DATA", "")

probe = subprocess.run([check_bin, "--probe"], capture_output=True, text=True)
if probe.returncode == 77:
    print(probe.stdout.strip())
    sys.exit(77)
if not mpirun or not os.path.exists(mpirun):
    print("SKIPPED: mpirun not found: tp and cp need several processes")
    sys.exit(77)

# (label, mkmodel options, vocabulary, dim, the (tp, cp) splits run)
BASE = ["--layers", "2", "--heads", "4", "--kv-heads", "2", "--type", "f32"]
MODELS = [
    ("qwen2_bias_untied", BASE + ["--arch", "qwen2", "--vocab", "700", "--dim", "128", "--ffn",
                                  "256"], 700, 128, [(2, 1), (1, 2)]),
    ("gemma2_window_softcap_tied", BASE + ["--arch", "gemma2", "--vocab", "300", "--dim", "64",
                                           "--head-dim", "32", "--ffn", "160", "--sliding-window",
                                           "12", "--attn-softcap", "50", "--final-softcap", "30",
                                           "--tied"], 300, 64, [(2, 1), (1, 2), (2, 2)]),
    ("gemma3_local_rope", BASE + ["--arch", "gemma3", "--vocab", "300", "--dim", "64",
                                  "--head-dim", "24", "--ffn", "160", "--sliding-window", "20",
                                  "--rope-scaling", "linear", "--rope-factor", "8"], 300, 64,
     [(1, 2)]),
]

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


def drive(model, tp, cp, out, backend="cuda"):
    """Runs the driver on tp * cp processes (mpirun when more than one); returns the rows
    (window, position, nll, argmax) of dp rank 0, or None when it failed."""
    cmd = [driver, model, str(tp), str(cp), str(T), str(SCORE_FROM), str(WINDOWS), str(SEED), out,
           backend]
    if tp * cp > 1:
        cmd = [mpirun, "-np", str(tp * cp)] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        check(False, "%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
        return None
    with open(out + ".dp0") as f:  # nll printed with 17 digits: parsed back exactly
        return [(int(w), int(pos), float(nll), int(am))
                for w, pos, nll, am in (line.split() for line in f)]


def weights(out, ranks):
    return [int(open("%s.weights.%d" % (out, r)).read()) for r in range(ranks)]


def compare(label, got, want, tol, what):
    if got is None or want is None:
        return
    if len(got) != len(want):
        check(False, "%s: %s: %d tokens, expected %d" % (label, what, len(got), len(want)))
        return
    worst = max(abs(g[2] - w[2]) / max(1.0, abs(w[2])) for g, w in zip(got, want))
    agree = sum(g[3] == w[3] for g, w in zip(got, want)) / len(want)
    ppl = [math.exp(sum(r[2] for r in rows) / len(rows)) for rows in (got, want)]
    rel = abs(ppl[0] - ppl[1]) / ppl[1]
    ppl_ok = rel <= PPL_TOL or tol != SPLIT_TOL  # perplexity checked for the splits
    check(worst <= tol and agree >= ARGMAX_AGREE and ppl_ok,
          "%s: %s: per-token nll within %.3g (tolerance %g), argmax agrees on %.1f%%, perplexity "
          "%.10g vs %.10g (relative %.3g)" % (label, what, worst, tol, 100 * agree, ppl[0], ppl[1],
                                              rel))


def check_model(path, label, vocab, dim, splits, tmp):
    base = os.path.join(tmp, label)
    one = drive(path, 1, 1, base + ".tp1")
    cpu = drive(path, 1, 1, base + ".cpu", "cpu")
    compare(label, one, cpu, CPU_TOL, "cuda tp 1 vs cpu tp 1")
    for tp, cp in splits:
        out = "%s.tp%dcp%d" % (base, tp, cp)
        rows = drive(path, tp, cp, out)
        compare(label, rows, one, SPLIT_TOL, "cuda tp %d cp %d vs cuda tp 1" % (tp, cp))
        if (tp, cp) == (2, 2):
            again = drive(path, tp, cp, out + ".again")
            check(rows is not None and again == rows,
                  "%s: two cuda tp 2 cp 2 runs bit-identical" % label)
        if (tp, cp) == (2, 1) and rows is not None and one is not None:
            whole = weights(base + ".tp1", 1)[0]
            embedding = vocab * dim * 4  # F32, uploaded whole on every rank
            shards = weights(out, 2)
            check(max(shards) <= whole / 2 + embedding + 0.02 * whole,
                  "%s: tp 2 device weights per rank %s, whole %d, embedding %d"
                  % (label, shards, whole, embedding))


def recipe(overrides, np=1):
    with tempfile.TemporaryDirectory() as tmp:
        rd = os.path.join(tmp, "rd")
        cmd = [BIN, "run", DEMO, "--run-dir", rd] + overrides
        if np > 1:
            cmd = [mpirun, "-np", str(np)] + cmd
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            check(False, "%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
            return None
        return json.load(open(os.path.join(rd, "results.json")))["metrics"]["ppl"]


with tempfile.TemporaryDirectory() as tmp:
    stories = os.path.join(shared, "models", "stories260K.gguf")
    if os.path.exists(stories):
        check_model(stories, "stories260K", 512, 64, [(2, 1), (1, 2)], tmp)
    else:
        print("stories260K.gguf not found: checking the evalmesh-mkmodel models only")
    for label, args, vocab, dim, splits in MODELS:
        path = os.path.join(tmp, label + ".gguf")
        subprocess.run([mkmodel] + args + ["--out", path], check=True, capture_output=True)
        check_model(path, label, vocab, dim, splits, tmp)

cuda = ["stages.ppl.device=cuda"]
mpi = cuda + ["stages.mesh.backend=mpi"]
runs = {"cpu": recipe([]), "cuda tp 1": recipe(cuda),
        "cuda tp 2": recipe(mpi + ["stages.mesh.tp=2"], 2),
        "cuda cp 2": recipe(mpi + ["stages.mesh.cp=2"], 2)}
if all(runs.values()):
    cpu, one = runs["cpu"]["token_ppl"]["value"], runs["cuda tp 1"]["token_ppl"]["value"]
    for name in ("cuda tp 2", "cuda cp 2"):
        got = runs[name]["token_ppl"]["value"]
        check(abs(got - one) / one <= RECIPE_SPLIT_TOL,
              "demo: token_ppl %s %r vs cuda tp 1 %r (relative %.3g)" % (name, got, one,
                                                                       abs(got - one) / one))
        check(abs(got - cpu) / cpu <= RECIPE_CPU_TOL,
              "demo: token_ppl %s %r vs cpu %r (relative %.3g)" % (name, got, cpu,
                                                                 abs(got - cpu) / cpu))
        keys = ("tokens", "windows", "words", "bytes")
        check(all(runs[name][k]["value"] == runs["cpu"][k]["value"] for k in keys),
              "demo: %s token, window, word and byte counts equal to the cpu's" % name)

sys.exit(1 if failures else 0)
