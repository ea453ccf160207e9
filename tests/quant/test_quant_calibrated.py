"""Calibrated quantization (the quantize stage's imatrix/imatrix_file and method awq) on
../shared/data/models/stories260K.gguf, with statistics computed independently in NumPy
(calib_numpy.py: reference.py's float64 forward over calibration text) and written as an
importance-matrix GGUF:
  - AWQ's rescaling alone (awq_fold_driver, alpha 0.5, no quantization): the folded model's NLLs
    from reference.py equal the original's within float tolerance;
  - held-out text (TinyStories stories the calibration did not see): importance-weighted Q4_0 and
    Q4_K_M, and importance-weighted and AWQ int4, score no worse than their plain forms; the run
    records what was calibrated (<stage>.calibration.json);
  - bad input: statistics missing a tensor the plan quantizes, or with other columns than its
    rows, and awq without statistics: exit 2 naming the tensor and the option's place.
Skips (exit 77) when ../shared/data or the gguf package is absent.

usage: test_quant_calibrated.py AWQ_FOLD_DRIVER
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, HERE)
from eval_helpers import EvalSession  # noqa: E402
from checks import check  # noqa: E402

try:
    import calib_numpy  # noqa: E402
    import reference  # noqa: E402  (tests/kernels, on the path calib_numpy set)
    import gguf  # noqa: E402,F401
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

FOLD_DRIVER = sys.argv[1]
DATA = os.environ.get("EVALMESH_SHARED_DATA", os.path.join(HERE, "..", "..", "..", "shared", "data"))
MODEL = os.path.join(DATA, "models", "stories260K.gguf")
STORIES = os.path.join(DATA, "text", "tinystories_sample.txt")
if not (os.path.exists(MODEL) and os.path.exists(STORIES)):
    print(f"skipped: {MODEL} or {STORIES} absent")
    sys.exit(77)

session = EvalSession("quant_calibrated_")
evalmesh, write = session.evalmesh, session.write
BIN = os.environ["EVALMESH_BIN"]

# Calibration: the first two stories; held out: the other three.
with open(STORIES) as f:
    lines = f.read().split("\n")
cut = next(i for i, l in enumerate(lines) if i > 8 and l.startswith("<|endoftext|>")) + 1
calib_text = write("calib.txt", "\n".join(lines[:cut]) + "\n")
held_out = write("held_out.txt", "\n".join(lines[cut:]))
ids = [int(v) for v in subprocess.run([BIN, "tokenize", MODEL, "--text-file", calib_text, "--ids-only"],
                                      check=True, capture_output=True, text=True).stdout.split()]
WINDOW = 128
windows = [ids[i:i + WINDOW + 1] for i in range(0, len(ids) - WINDOW, WINDOW)]
meta, tensors, _ = reference.read_gguf(MODEL)
stats = calib_numpy.statistics(meta, tensors, windows)
order = [name for name in tensors if name in stats]
imatrix = os.path.join(session.tmp, "stories.imatrix.gguf")
calib_numpy.write_imatrix(imatrix, stats, order, WINDOW, dataset=calib_text)
print(f"calibration: {len(windows)} windows of {WINDOW} tokens, {len(order)} weights")

# --- AWQ's fold alone computes the same function -------------------------------------------
fold_dir = os.path.join(session.tmp, "fold")
os.makedirs(fold_dir)
p = subprocess.run([FOLD_DRIVER, MODEL, imatrix, "0.5", fold_dir], capture_output=True, text=True)
check(p.returncode == 0, "awq_fold_driver runs", p.stderr)
folded = dict(tensors)
for fn in os.listdir(fold_dir):
    name = fn[:-4]
    folded[name] = np.fromfile(os.path.join(fold_dir, fn), np.float32).astype(np.float64).reshape(
        tensors[name].shape)
changed = sorted(os.listdir(fold_dir))
check(len(changed) == 5 * 8, f"the fold changes q, k, v, gate, up, down and both norms of 5 layers "
      f"({len(changed)} tensors)")
check(all(not np.array_equal(folded[n[:-4]], tensors[n[:-4]]) for n in changed),
      "every written tensor differs from the original")
nll_diff = 0.0
for w in windows[:2]:
    a, _, _ = reference.forward(meta, tensors, np.array(w[:-1]), np.array(w[1:]))
    b, _, _ = reference.forward(meta, folded, np.array(w[:-1]), np.array(w[1:]))
    nll_diff = max(nll_diff, float(np.abs(a - b).max()))
check(nll_diff < 1e-4, f"folded model's NLLs equal the original's (max |diff| {nll_diff:.2e})")
print(f"fold: max |NLL difference| {nll_diff:.2e} over {2 * WINDOW} tokens")

# --- held-out text: calibrated no worse than plain ------------------------------------------
DOWN = "[" + ",".join(f"blk.{i}.ffn_down.weight" for i in range(5)) + "]"  # rows of 172 values


def recipe(name, quantize):
    """model -> quantize (options `quantize`) -> forward over the held-out text."""
    opts = "\n".join(f"    {k}: {v}" for k, v in quantize.items())
    return write(name, f"""name: {name}
stages:
  model: {{kind: model, path: "{MODEL}"}}
  q:
    kind: quantize
    model: model
{opts}
  data: {{kind: dataset, tokenizer: model, path: "{held_out}", protocol: chunked, n_ctx: 128}}
  fwd: {{kind: forward, model: q, data: data, threads: 1}}
  agg: {{kind: aggregate, inputs: [fwd]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")


def run(name, quantize):
    rc, out, err, res = evalmesh(["run", recipe(name + ".yaml", quantize)])
    ok = check(rc == 0 and res, f"{name} runs", err[-2000:])
    run_dir = os.path.join(session.tmp, f"run{session.runs}")
    return (res["metrics"]["fwd"]["token_ppl"]["value"] if ok else None), err, run_dir


f_imatrix = f'"{imatrix}"'
cases = [("Q4_0", {"scheme": "Q4_0", "exclude": DOWN}, {"imatrix_file": f_imatrix}),
         ("Q4_K_M", {"scheme": "Q4_K_M", "exclude": DOWN}, {"imatrix_file": f_imatrix}),
         ("int4 g32 rtn", {"scheme": "int4_weight_only", "group_size": 32, "exclude": DOWN},
          {"imatrix_file": f_imatrix}),
         ("int4 g32 awq", {"scheme": "int4_weight_only", "group_size": 32, "exclude": DOWN},
          {"imatrix_file": f_imatrix, "method": "awq"})]
for label, plain_opts, calib_opts in cases:
    tag = re.sub(r"\W", "_", label)
    plain, _, _ = run(f"plain_{tag}", plain_opts)
    calib, err, run_dir = run(f"calib_{tag}", {**plain_opts, **calib_opts})
    if plain is None or calib is None:
        continue
    print(f"{label}: held-out token ppl plain {plain:.5f}, calibrated {calib:.5f}")
    check(calib <= plain, f"{label}: calibrated ppl {calib:.5f} no worse than plain {plain:.5f}")
    check(calib != plain, f"{label}: the calibration changes the result")
    rec_path = os.path.join(run_dir, "q.calibration.json")
    if check(os.path.exists(rec_path), f"{label}: q.calibration.json written"):
        with open(rec_path) as f:
            rec = json.load(f)
        check(rec["tokens"] == len(windows) * WINDOW and rec["windows"] == len(windows),
              f"{label}: records the calibration tokens and windows", str(rec))
        check(rec["dataset"] == calib_text, f"{label}: records the dataset", str(rec))
        check(rec["method"] == calib_opts.get("method", "rtn"), f"{label}: records the method")
        if rec["method"] == "awq":
            # 5 layers x (qkv, gate_up); down is excluded here
            check(rec["awq_groups"] == 10, f"{label}: 10 groups rescaled", str(rec))
            check(rec["awq_error"] <= rec["awq_error_plain"], f"{label}: estimated error no worse")
            print(f"  awq: mean alpha {rec['awq_mean_alpha']}, estimated output error "
                  f"{rec['awq_error']:.4g} vs plain {rec['awq_error_plain']:.4g}")
        else:
            # Q4_K_M: attn_v of layers 2 and 4 get Q6_K, Q8_0 on rows of 64, which has no
            # weighted form (ggml ignores the weights)
            weighted = 28 if label == "Q4_K_M" else 30
            check(rec["tensors_quantized"] == 30 and rec["tensors_importance_weighted"] == weighted,
                  f"{label}: {weighted} of 30 tensors importance-weighted", str(rec))

# --- bad input -------------------------------------------------------------------------------
missing = os.path.join(session.tmp, "missing.imatrix.gguf")
calib_numpy.write_imatrix(missing, stats, [n for n in order if n != "blk.1.attn_k.weight"], WINDOW)
rc, _, err, _ = evalmesh(["run", recipe("missing.yaml", {"scheme": "Q4_0", "exclude": DOWN,
                                                         "imatrix_file": f'"{missing}"'})])
check(rc == 2, f"statistics missing a tensor: exit 2 (got {rc})", err[-2000:])
check(re.search(r"missing\.yaml:9:\d+: scheme Q4_0: tensor blk\.1\.attn_k\.weight: the calibration "
                r"statistics have no entry for it", err), "statistics missing a tensor: message", err[-2000:])
short = os.path.join(session.tmp, "short.imatrix.gguf")
calib_numpy.write_imatrix(short, stats, order, WINDOW, columns={"blk.0.ffn_up.weight": 32})
rc, _, err, _ = evalmesh(["run", recipe("short.yaml", {"scheme": "Q4_0", "exclude": DOWN,
                                                       "imatrix_file": f'"{short}"'})])
check(rc == 2, f"columns mismatch: exit 2 (got {rc})", err[-2000:])
check(re.search(r"short\.yaml:9:\d+: scheme Q4_0: tensor blk\.0\.ffn_up\.weight: the calibration "
                r"statistics have 32 columns, the weight's rows 64", err), "columns mismatch: message",
      err[-2000:])
rc, _, err, _ = evalmesh(["run", recipe("nostats.yaml", {"scheme": "Q4_0", "method": "awq"})])
check(rc == 2, f"awq without statistics: exit 2 (got {rc})", err[-2000:])
check(re.search(r"nostats\.yaml:\d+:\d+: stage 'q': method awq needs calibration statistics", err),
      "awq without statistics: message", err[-2000:])

session.finish()
