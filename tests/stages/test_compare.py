"""The compare stage (stages/kinds/compare.c) on stories260K (../shared/data; skipped without it):
- a model against itself (a second model stage of the same file): KLD exactly 0 at every
  percentile, Delta p exactly 0, ln(PPL ratio) 0 and top-token agreement exactly 1;
- Q8_0 and Q4_0 candidates from the quantize stage (written as GGUF too): Q8_0's mean KLD far
  below Q4_0's;
- every statistic against an independent NumPy computation: tests/kernels/reference.py's float64
  forward of the reference and of both written GGUFs over the same windows (token ids from a
  tokens_u32 file, chunked n_ctx 64 without BOS), KL etc. from the full softmaxes and llama.cpp's
  formulas written here;
- results.json metrics bit-identical with 3 threads, and under mpirun with 1, 2, 3 and 4 ranks;
- bad input, exit 2 from `evalmesh validate`: a candidate from another model file whose tokenizer
  differs from the dataset's (naming both stages and files and the difference), and a mesh with tp 2 (two different
  datasets cannot be given: the stage takes one `data` and runs both forwards itself);
- recipes/quant_kld.yaml runs, one table row per candidate, Q8_0's KLD far below the 4-bit ones,
  the calibrated candidates' below their plain forms'."""
import math
import os
import subprocess
import sys

import numpy as np

from eval_helpers import MPIRUN, EvalSession
from kld_numpy import llama_stats
from resume_helpers import HEADER

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
sys.path.insert(0, os.path.join(here, "..", "kernels"))
from checks import check  # noqa: E402
import reference  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "")
MODEL = os.path.join(DATA, "models", "stories260K.gguf")
OTHER = os.path.join(here, "..", "..", "recipes", "data", "demo-model.gguf")
if not os.path.exists(MODEL):
    print(f"SKIPPED: shared data not found under '{DATA}'")
    sys.exit(77)

session = EvalSession("eval_compare_")
evalmesh, write = session.evalmesh, session.write
N_CTX, CHUNKS, VOCAB = 64, 6, 512
rng = np.random.default_rng(15)
ids = rng.integers(1, VOCAB, size=N_CTX * CHUNKS).astype("<u4")
tokens = write("ids.u32", ids.tobytes(), "wb")
EXCLUDE = "[" + ", ".join(f"blk.{i}.ffn_down.weight" for i in range(5)) + "]"  # rows of 172


def recipe(candidates, extra=""):
    """The models, a dataset and one compare stage per (name, [candidates]); the report shows
    the first."""
    stages = [f"""  ref:
    kind: model
    path: {MODEL}
  same:
    kind: model
    path: {MODEL}
  q8:
    kind: quantize
    model: ref
    scheme: Q8_0
    exclude: {EXCLUDE}
    gguf: q8.gguf
  q4:
    kind: quantize
    model: ref
    scheme: Q4_0
    exclude: {EXCLUDE}
    gguf: q4.gguf
  data:
    kind: dataset
    tokenizer: ref
    path: {tokens}
    format: tokens_u32
    protocol: chunked
    n_ctx: {N_CTX}
    add_bos: false
"""]
    for name, cand in candidates:
        stages.append(f"""  {name}:
    kind: compare
    reference: ref
    candidates: [{", ".join(cand)}]
    data: data
    threads: 1
{extra}""")
    first = candidates[0][0]
    stages.append(f"""  report:
    kind: report
    metrics: {first}
    outputs: [json]
""")
    return "name: compare_test\nstages:\n" + "".join(stages)


def metrics(res, stage):
    return {k: v for k, v in res["metrics"][stage].items() if not v.get("timing")}


# 1. A model against itself: exactly nothing changes.
path = write("self.yaml", recipe([("c", ["same"])]))
rc, out, err, res = evalmesh(["run", path])
check(rc == 0, "self compare rc", err[-2000:])
m = metrics(res, "same") if res else {}
zero = [k for k in m if k.startswith(("kld", "dp")) and m[k]["value"] != 0]
check(m and not zero, "self compare: every KLD and Delta p statistic exactly 0", str(zero))
check(m and m["same_top"]["value"] == 1.0, "self compare: same top exactly 1", str(m.get("same_top")))
check(m and m["ln_ppl_ratio"]["value"] == 0 and m["ppl"]["value"] == m["ppl_base"]["value"],
      "self compare: PPL(Q) = PPL(base)", str(m.get("ln_ppl_ratio")))
check(m and m["tokens"]["value"] == CHUNKS * (N_CTX - 1 - N_CTX // 2), "scored tokens",
      str(m.get("tokens")))


def numpy_compare(base, cand):
    """Per-token nll of both, KL(base || cand), dp and top agreement over the test's windows."""
    out = {k: [] for k in ("nll_base", "nll", "kld", "dp", "same")}
    for c in range(CHUNKS):
        chunk = ids[c * N_CTX:(c + 1) * N_CTX].astype(np.int64)
        inp, tgt, first = chunk[:-1], chunk[1:], N_CTX // 2
        nb, ab, lb = reference.forward(base[0], base[1], inp, tgt)
        nq, aq, lq = reference.forward(cand[0], cand[1], inp, tgt)
        lb, lq = lb[first:], lq[first:]
        logp = lb - lb.max(axis=1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
        logq = lq - lq.max(axis=1, keepdims=True)
        logq -= np.log(np.exp(logq).sum(axis=1, keepdims=True))
        out["kld"].append((np.exp(logp) * (logp - logq)).sum(axis=1))
        out["nll_base"].append(nb[first:])
        out["nll"].append(nq[first:])
        out["dp"].append(np.exp(-nq[first:]) - np.exp(-nb[first:]))
        out["same"].append((ab[first:] == aq[first:]).astype(np.float64))
    v = {k: np.concatenate(x) for k, x in out.items()}
    return llama_stats(v["nll_base"], v["nll"], v["kld"], v["dp"], v["same"])


# 2. Q8_0 and Q4_0 against the reference, and against NumPy.
path = write("quant.yaml", recipe([("c", ["q8", "q4"])]))
rc, out, err, res = evalmesh(["run", path])
check(rc == 0 and res is not None, "quant compare rc", err[-2000:])
run_dir = os.path.join(session.tmp, f"run{session.runs}")
got = {c: metrics(res, c) for c in ("q8", "q4")} if res else {"q8": {}, "q4": {}}
base = reference.read_gguf(MODEL)
for stage in ("q8", "q4"):
    cand = reference.read_gguf(os.path.join(run_dir, stage + ".gguf"))
    want = numpy_compare(base, cand)
    for key, (value, error) in want.items():
        g = got[stage].get(key, {}).get("value")
        if key == "same_top":
            ok = g is not None and abs(g - value) <= 1.5 / len(ids)  # a near tie may flip
        elif key.startswith(("kld", "dp_rms")) or key == "ln_ppl_ratio":
            ok = g is not None and abs(g - value) <= 2e-3 * abs(value) + 2e-6
        else:
            ok = g is not None and abs(g - value) <= 1e-4 * abs(value) + 2e-6
        check(ok, f"{stage}.{key} against NumPy", f"got {g}, NumPy {value}")
        if error is not None and g is not None:
            e = got[stage][key].get("error")
            check(e is not None and abs(e - error) <= 2e-3 * error + 1e-7,
                  f"{stage}.{key} error against NumPy", f"got {e}, NumPy {error}")
# The pair's own scores are the plain forward's, bit for bit: forwards of the reference and of
# the Q4_0 model over the same windows give exactly the compare's per-token NLLs and argmaxes
# (the paired head computes both heads' logits once, for the scores and the KL divergence).
fwd = recipe([("c", ["q4"])], "    records: true\n").replace("  report:\n", """  fr:
    kind: forward
    model: ref
    data: data
  fq:
    kind: forward
    model: q4
    data: data
  agg:
    kind: aggregate
    inputs: [fr, fq]
  report:
""")
rc, out, err, fres = evalmesh(["run", write("forwards.yaml", fwd)])
check(rc == 0 and fres is not None, "forwards rc", err[-2000:])
records_dir = os.path.join(session.tmp, f"run{session.runs}", "records")


def forward_records(stage):
    """(nll, argmax) per scored token in window order from a forward's window records (the
    layout of stages/metrics/window_records.h)."""
    nll, arg = {}, {}
    for name in sorted(os.listdir(records_dir)):
        if not name.startswith(stage + ".rank"):
            continue
        with open(os.path.join(records_dir, name), "rb") as f:
            data = f.read()
        at = HEADER
        while at < len(data):
            size = int.from_bytes(data[at + 4:at + 8], "little")
            p = at + 12
            window, n = np.frombuffer(data, "<i8", 1, p)[0], np.frombuffer(data, "<i4", 1, p + 8)[0]
            arg[window] = np.frombuffer(data, "<i4", n, p + 40 + 4 * n)
            nll[window] = np.frombuffer(data, "<f8", n, p + 40 + 8 * n)
            at = p + size
    order = sorted(nll)
    return np.concatenate([nll[w] for w in order]), np.concatenate([arg[w] for w in order])


PAIR = np.dtype([("window", "<i8"), ("position", "<i4"), ("target", "<i4"), ("arg_ref", "<i4"),
                 ("arg_cand", "<i4"), ("nll_ref", "<f8"), ("nll_cand", "<f8"), ("kld", "<f8")])
if rc == 0:
    with open(os.path.join(records_dir, "c.q4.rank0.tokens"), "rb") as f:
        pair = np.frombuffer(f.read()[208:], dtype=PAIR)
    pair = pair[np.lexsort((pair["position"], pair["window"]))]
    for name, stage, side in (("reference", "fr", "ref"), ("Q4_0", "fq", "cand")):
        nll, arg = forward_records(stage)
        check(len(nll) == len(pair) == CHUNKS * (N_CTX - 1 - N_CTX // 2) and
              np.array_equal(nll, pair["nll_" + side]) and np.array_equal(arg, pair["arg_" + side]),
              f"{name}: the compare's per-token NLL and argmax are the forward's, bit for bit",
              f"{len(nll)} tokens, {np.count_nonzero(nll != pair['nll_' + side])} NLLs differ")
kld8 = got["q8"].get("kld_mean", {}).get("value", 1)
kld4 = got["q4"].get("kld_mean", {}).get("value", 0)
print(f"mean KLD Q8_0 {kld8}, Q4_0 {kld4}")
check(kld8 * 20 < kld4, "Q8_0's KLD far below Q4_0's", f"{kld8} vs {kld4}")

# 3. The same bits with 3 threads, and on 1, 2, 3 and 4 ranks.
rc, out, err, r = evalmesh(["run", path, "stages.c.threads=3"])
check(rc == 0 and res is not None and r is not None and r["metrics"] == res["metrics"],
      "bit-identical with 3 threads", err[-2000:])
if MPIRUN:
    seen = []
    for np_ in (1, 2, 3, 4):
        rc, out, err, r = evalmesh(["run", path], np=np_)
        check(rc == 0 and r is not None, f"{np_} ranks rc", err[-2000:])
        if r:
            seen.append(r["metrics"])
    check(len(seen) == 4 and all(s == seen[0] for s in seen), "bit-identical on 1-4 ranks")
else:
    print("mpirun not found: the 1-4 rank check is skipped")

# 4. Bad input, refused by validate.
def validate(path):
    p = subprocess.run([os.environ["EVALMESH_BIN"], "validate", path], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr, None


bad = recipe([("c", ["q8", "other"])]).replace("  report:", f"  other:\n    kind: model\n    path: {OTHER}\n  report:")
rc, out, err, _ = validate(write("bad_tok.yaml", bad))
check(rc == 2, "another tokenizer: exit 2", f"{rc} {err}")
check("candidates 'other' comes from model stage 'other'" in err and "dataset 'data' is tokenized by "
      "model stage 'ref': different tokenizers (model stage 'ref' (" in err and
      "has a llama tokenizer, model stage 'other' (" in err, "another tokenizer: message", err)
check("bad_tok.yaml:" in err, "another tokenizer: names the place", err)
mesh = recipe([("c", ["q8"])], "    mesh: m\n").replace(
    "  data:\n", "  m:\n    kind: mesh\n    tp: 2\n  data:\n    mesh: m\n")
rc, out, err, _ = validate(write("bad_mesh.yaml", mesh))
check(rc == 2, "tp 2: exit 2", f"{rc} {err}")
check("mesh 'm' has tp = 2, but compare scores both models of a window on one rank" in err,
      "tp 2: message", err)
# 5. recipes/quant_kld.yaml: one table row per candidate, Q8_0 far closer than the 4-bit ones.
stories = os.path.join(DATA, "text", "tinystories_sample.txt")
wiki = os.path.join(DATA, "text", "wiki.test.raw")
rc, out, err, res = evalmesh(["run", os.path.join(here, "..", "..", "recipes", "quant_kld.yaml"),
                              f"stages.model.path={MODEL}", f"stages.text.path={stories}",
                              f"stages.calib_text.path={wiki}"])
check(rc == 0 and res is not None, "quant_kld.yaml rc", err[-2000:])
if res:
    kld = {c: res["metrics"][c]["kld_mean"]["value"]
           for c in ("q8", "q4km", "q4km_imatrix", "int4", "int4_awq")}
    print("quant_kld.yaml mean KLD:", kld)
    check(all(kld["q8"] * 10 < kld[c] for c in kld if c != "q8"), "Q8_0 far below 4-bit", str(kld))
    # calibrated on WikiText, scored on TinyStories: closer to the reference than plain
    check(kld["q4km_imatrix"] < kld["q4km"] and kld["int4_awq"] < kld["int4"],
          "calibrated candidates closer to the reference than plain ones", str(kld))
    check(all(f"{c}.same_top" in out for c in kld), "the table shows every candidate", out[-3000:])
session.finish()
