"""Calibrated quantization (the quantize stage's imatrix/imatrix_file and method awq) on
../shared/data/models/stories260K.gguf, with statistics computed independently in NumPy
(calib_numpy.py: reference.py's float64 forward over calibration text) and written as an
importance-matrix GGUF:
  - AWQ's rescaling alone (awq_fold_driver, alpha 0.5, no quantization): the folded model's NLLs
    from reference.py equal the original's within float tolerance; without |x| sums (llama.cpp's
    imatrix files) the scales follow each channel's RMS;
  - held-out text (TinyStories stories the calibration did not see), through the compare stage:
    importance-weighted Q4_0 and Q4_K_M, importance-weighted, AWQ and AWQ with importance-weighted
    rounding (awq_imatrix) int4, and Q4_K_M awq_imatrix, with statistics from
    NumPy (imatrix_file) and from a calibrate stage (imatrix), are closer to the reference (mean
    KLD) than their plain forms and not worse in PPL beyond its error; each run records what was
    calibrated (<stage>.calibration.json);
  - the stage's importance weights are llama-quantize's, sum x^2 / count per column: its Q4_K_M
    GGUF holds, for every weighted tensor, the bytes quant_dump (whose weighted quantizers
    test_quant_blocks.py checks against ggml's) makes with those weights;
  - bad input: statistics missing a tensor the plan quantizes, or with other columns than its
    rows, and awq without statistics: exit 2 naming the tensor and the option's place.
Skips (exit 77) when ../shared/data or the gguf package is absent.

usage: test_quant_calibrated.py AWQ_FOLD_DRIVER QUANT_DUMP
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

FOLD_DRIVER, QUANT_DUMP = sys.argv[1], sys.argv[2]
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
# statistics without |x| sums (as llama.cpp's imatrix files are): the scales use each channel's RMS
no_abs = os.path.join(session.tmp, "no_abs.imatrix.gguf")
calib_numpy.write_imatrix(no_abs, stats, order, WINDOW, with_abs=False)
rms_dir = os.path.join(session.tmp, "fold_rms")
os.makedirs(rms_dir)
p = subprocess.run([FOLD_DRIVER, MODEL, no_abs, "1", rms_dir], capture_output=True, text=True)
if check(p.returncode == 0, "awq_fold_driver runs on statistics without |x| sums", p.stderr):
    # alpha 1: attn_norm / s with s = RMS / sqrt(max RMS * min RMS), RMS = sqrt(sum_x2 / count)
    s2, _, _, c = stats["blk.0.attn_q.weight"]
    rms = np.sqrt((s2.astype(np.float32).astype(np.float64)) / c)
    want = tensors["blk.0.attn_norm.weight"] / (rms / np.sqrt(rms.max() * rms.min()))
    got = np.fromfile(os.path.join(rms_dir, "blk.0.attn_norm.weight.f32"), np.float32)
    check(np.allclose(got, want, rtol=1e-5), "without |x| sums the scales are the channels' RMS",
          f"max rel diff {np.max(np.abs(got / want - 1)):.2e}")

# --- held-out text: calibrated no worse than plain ------------------------------------------
# One compare run per scheme over the held-out stories: the reference against the plain
# quantization and the calibrated ones (statistics from NumPy through imatrix_file, and from a
# calibrate stage over the same calibration text through imatrix). Calibrated is "no worse" when
# its mean KLD from the reference is below the plain one's and its ln(PPL(Q)/PPL(base)) exceeds the
# plain one's by less than the plain one's error (the PPL of 1,100 tokens moves by noise alone).
DOWN = "[" + ",".join(f"blk.{i}.ffn_down.weight" for i in range(5)) + "]"  # rows of 172 values


def quantize_stage(name, opts):
    lines = "".join(f"    {k}: {v}\n" for k, v in opts.items())
    return f"  {name}:\n    kind: quantize\n    model: model\n{lines}"


def recipe(name, stages, candidates):
    return write(name, f"""name: {name}
stages:
  model: {{kind: model, path: "{MODEL}"}}
  ctext: {{kind: dataset, tokenizer: model, path: "{calib_text}", protocol: chunked, n_ctx: {WINDOW + 1}}}
  cal: {{kind: calibrate, model: model, data: ctext}}
{stages}  data: {{kind: dataset, tokenizer: model, path: "{held_out}", protocol: chunked, n_ctx: 128}}
  kld: {{kind: compare, reference: model, candidates: [{", ".join(candidates)}], data: data}}
  report: {{kind: report, metrics: kld, outputs: [json]}}
""")


cases = [("Q4_0", {"scheme": "Q4_0", "exclude": DOWN}, {}),
         ("Q4_K_M", {"scheme": "Q4_K_M", "exclude": DOWN}, {}),
         ("int4_rtn", {"scheme": "int4_weight_only", "group_size": 32, "exclude": DOWN}, {}),
         ("int4_awq", {"scheme": "int4_weight_only", "group_size": 32, "exclude": DOWN},
          {"method": "awq"}),
         ("int4_awq_imatrix", {"scheme": "int4_weight_only", "group_size": 32, "exclude": DOWN},
          {"method": "awq_imatrix"}),
         ("Q4_K_M_awq_imatrix", {"scheme": "Q4_K_M", "exclude": DOWN}, {"method": "awq_imatrix"})]
for label, plain_opts, method in cases:
    stages = (quantize_stage("plain", plain_opts)
              + quantize_stage("file", {**plain_opts, **method, "imatrix_file": f'"{imatrix}"'})
              + quantize_stage("stage", {**plain_opts, **method, "imatrix": "cal"}))
    rc, out, err, res = evalmesh(["run", recipe(f"{label}.yaml", stages, ["plain", "file", "stage"])])
    if not check(rc == 0 and res, f"{label} runs", err[-2000:]):
        continue
    m = res["metrics"]
    kld = {c: m[c]["kld_mean"]["value"] for c in ("plain", "file", "stage")}
    ln = {c: m[c]["ln_ppl_ratio"]["value"] for c in ("plain", "file", "stage")}
    print(f"{label}: held-out mean KLD plain {kld['plain']:.5f}, NumPy statistics {kld['file']:.5f}, "
          f"calibrate stage {kld['stage']:.5f}; PPL {m['plain']['ppl']['value']:.4f} / "
          f"{m['file']['ppl']['value']:.4f} / {m['stage']['ppl']['value']:.4f}")
    for c in ("file", "stage"):
        check(kld[c] < kld["plain"], f"{label} ({c}): mean KLD {kld[c]:.5f} below plain {kld['plain']:.5f}")
        check(ln[c] < ln["plain"] + m["plain"]["ln_ppl_ratio"]["error"],
              f"{label} ({c}): ln PPL ratio {ln[c]:.5f} not above plain's {ln['plain']:.5f} + its error")
    run_dir = os.path.join(session.tmp, f"run{session.runs}")
    for c, source in (("file", imatrix), ("stage", "cal")):
        rec_path = os.path.join(run_dir, f"{c}.calibration.json")
        if not check(os.path.exists(rec_path), f"{label}: {c}.calibration.json written"):
            continue
        with open(rec_path) as f:
            rec = json.load(f)
        check(rec["statistics"] == source and rec["dataset"] == calib_text,
              f"{label} ({c}): records the statistics' source and text", str(rec))
        check(rec["windows"] == len(windows) and rec["tokens"] == len(windows) * WINDOW,
              f"{label} ({c}): records {len(windows)} windows, {len(windows) * WINDOW} tokens", str(rec))
        check(rec["method"] == method.get("method", "rtn"), f"{label} ({c}): records the method")
        # Q4_K_M: attn_v of layers 2 and 4 get Q6_K, Q8_0 on rows of 64, which has no
        # weighted form (ggml ignores the weights)
        weighted = {"rtn": 28 if label == "Q4_K_M" else 30, "awq": 0,
                    "awq_imatrix": 28 if label.startswith("Q4_K_M") else 30}[rec["method"]]
        check(rec["tensors_quantized"] == 30 and rec["tensors_importance_weighted"] == weighted,
              f"{label} ({c}): {weighted} of 30 tensors importance-weighted", str(rec))
        if rec["method"] != "rtn":
            # 5 layers x (qkv, gate_up); down is excluded here
            check(rec["awq_groups"] == 10, f"{label} ({c}): 10 groups rescaled", str(rec))
            check(rec["awq_error"] <= rec["awq_error_plain"], f"{label} ({c}): estimated error no worse")
            print(f"  {c}: mean alpha {rec['awq_mean_alpha']}, estimated output error "
                  f"{rec['awq_error']:.4g} vs plain {rec['awq_error_plain']:.4g}")


def single(name, opts):
    """A run quantizing with opts alone (for the bad-input cases)."""
    return write(name, f"""name: {name}
stages:
  model: {{kind: model, path: "{MODEL}"}}
{quantize_stage("q", opts)}  data: {{kind: dataset, tokenizer: model, path: "{held_out}", protocol: chunked, n_ctx: 128}}
  fwd: {{kind: forward, model: q, data: data, threads: 1}}
""")


# --- the importance weights the stage passes: sum_x2 / count of the imatrix, per column -------
from gguf_reader import read_gguf_index  # noqa: E402  (tests/support)
out_gguf = os.path.join(session.tmp, "q4km_imatrix.gguf")
rc, _, err, _ = evalmesh(["run", single("written.yaml", {"scheme": "Q4_K_M", "exclude": DOWN,
                                                         "imatrix_file": f'"{imatrix}"',
                                                         "gguf": f'"{out_gguf}"'})])
if check(rc == 0 and os.path.exists(out_gguf), "Q4_K_M with imatrix written as GGUF", err[-2000:]):
    data, _, infos, start = read_gguf_index(out_gguf)
    imx_data, _, imx_infos, imx_start = read_gguf_index(imatrix)
    imx = {name: np.frombuffer(imx_data, np.float32, int(np.prod(shape)), imx_start + off)
           for name, shape, _, off in imx_infos}
    types = {2: "Q4_0", 6: "Q5_0", 8: "Q8_0", 12: "Q4_K", 14: "Q6_K"}
    checked = 0
    for name, shape, t, off in infos:
        if name not in stats or types.get(t) is None:
            continue
        qw = (imx[name + ".in_sum2"].astype(np.float64) / float(imx[name + ".counts"][0])).astype(np.float32)
        src, qwf, dst = (os.path.join(session.tmp, f) for f in ("w.f32", "qw.f32", "w.bin"))
        tensors[name].astype(np.float32).tofile(src)
        qw.tofile(qwf)
        subprocess.run([QUANT_DUMP, types[t], str(shape[0]), src, dst, qwf], check=True)
        want = open(dst, "rb").read()
        got = bytes(data[start + off:start + off + len(want)])
        checked += check(got == want, f"{name} ({types[t]}): the GGUF's bytes are the weighted "
                                      f"quantizer's with sum_x2 / count")
    check(checked == 30, f"every quantized tensor compared ({checked})")

# --- bad input -------------------------------------------------------------------------------
missing = os.path.join(session.tmp, "missing.imatrix.gguf")
calib_numpy.write_imatrix(missing, stats, [n for n in order if n != "blk.1.attn_k.weight"], WINDOW)
rc, _, err, _ = evalmesh(["run", single("missing.yaml", {"scheme": "Q4_0", "exclude": DOWN,
                                                         "imatrix_file": f'"{missing}"'})])
check(rc == 2, f"statistics missing a tensor: exit 2 (got {rc})", err[-2000:])
check(re.search(r"missing\.yaml:9:\d+: scheme Q4_0: tensor blk\.1\.attn_k\.weight: the calibration "
                r"statistics have no entry for it", err), "statistics missing a tensor: message", err[-2000:])
short = os.path.join(session.tmp, "short.imatrix.gguf")
calib_numpy.write_imatrix(short, stats, order, WINDOW, columns={"blk.0.ffn_up.weight": 32})
rc, _, err, _ = evalmesh(["run", single("short.yaml", {"scheme": "Q4_0", "exclude": DOWN,
                                                       "imatrix_file": f'"{short}"'})])
check(rc == 2, f"columns mismatch: exit 2 (got {rc})", err[-2000:])
check(re.search(r"short\.yaml:9:\d+: scheme Q4_0: tensor blk\.0\.ffn_up\.weight: the calibration "
                r"statistics have 32 columns, the weight's rows 64", err), "columns mismatch: message",
      err[-2000:])
rc, _, err, _ = evalmesh(["run", single("nostats.yaml", {"scheme": "Q4_0", "method": "awq"})])
check(rc == 2, f"awq without statistics: exit 2 (got {rc})", err[-2000:])
check(re.search(r"nostats\.yaml:\d+:\d+: stage 'q': method awq needs calibration statistics", err),
      "awq without statistics: message", err[-2000:])

session.finish()
