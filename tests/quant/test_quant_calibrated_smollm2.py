"""Calibrated quantization on the real SmolLM2-135M-Instruct (tools/fetch-smollm2; its Q4_1
weights are dequantized and quantized again, allow_requantize): a calibrate stage over two
WikiText-2 windows of 256 tokens, then, on held-out text (three 128-token windows of the TinyStories
sample, which the calibration did not see; kept short for the sanitizer build), the compare stage scores Q4_K_M plain and with the importance matrix, and int4_weight_only
(groups of 64: the 576-wide rows take no 128) plain and with AWQ, against the reference. Each
calibrated candidate must have a lower mean KLD than its plain form and a ln(PPL(Q)/PPL(base)) not
above the plain one's plus its error. Skips (exit 77) when ../shared/data is absent or SmolLM2
cannot be fetched (offline).

usage: test_quant_calibrated_smollm2.py
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
from eval_helpers import EvalSession  # noqa: E402
from checks import check  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", os.path.join(HERE, "..", "..", "..", "shared", "data"))
SOURCE = os.environ.get("EVALMESH_SOURCE_DIR", os.path.join(HERE, "..", ".."))
wiki = os.path.join(DATA, "text", "wiki.test.raw")
stories = os.path.join(DATA, "text", "tinystories_sample.txt")
if not (os.path.exists(wiki) and os.path.exists(stories)):
    print(f"SKIPPED: {wiki} or {stories} is absent (the shared test data)")
    sys.exit(77)
fetch = subprocess.run([os.path.join(SOURCE, "tools", "fetch-smollm2")], capture_output=True, text=True)
if fetch.returncode != 0:
    print("SKIPPED: tools/fetch-smollm2 could not fetch SmolLM2 (offline?): " + fetch.stderr.strip())
    sys.exit(77)
model = fetch.stdout.strip()

session = EvalSession("quant_calibrated_smollm2_")
recipe = session.write("smollm2.yaml", f"""name: smollm2-calibrated
stages:
  model: {{kind: model, path: "{model}"}}
  calib_text: {{kind: dataset, tokenizer: model, path: "{wiki}", protocol: chunked, n_ctx: 256, max_windows: 2}}
  cal: {{kind: calibrate, model: model, data: calib_text}}
  q4km: {{kind: quantize, model: model, scheme: Q4_K_M, allow_requantize: true}}
  q4km_imatrix: {{kind: quantize, model: model, scheme: Q4_K_M, allow_requantize: true, imatrix: cal}}
  int4: {{kind: quantize, model: model, scheme: int4_weight_only, group_size: 64, allow_requantize: true}}
  int4_awq: {{kind: quantize, model: model, scheme: int4_weight_only, group_size: 64, allow_requantize: true,
             imatrix: cal, method: awq}}
  text: {{kind: dataset, tokenizer: model, path: "{stories}", protocol: chunked, n_ctx: 128, max_windows: 3}}
  kld: {{kind: compare, reference: model, candidates: [q4km, q4km_imatrix, int4, int4_awq], data: text}}
  report: {{kind: report, metrics: kld, calibrations: [cal], outputs: [json]}}
""")
rc, out, err, res = session.evalmesh(["run", recipe])
if check(rc == 0 and res, "SmolLM2 calibrated run", err[-3000:]):
    m = res["metrics"]
    for c in ("q4km", "q4km_imatrix", "int4", "int4_awq"):
        print(f"{c}: PPL {m[c]['ppl']['value']:.4f} ± {m[c]['ppl']['error']:.4f}, ln ratio "
              f"{m[c]['ln_ppl_ratio']['value']:.4f} ± {m[c]['ln_ppl_ratio']['error']:.4f}, mean KLD "
              f"{m[c]['kld_mean']['value']:.5f} ± {m[c]['kld_mean']['error']:.5f}, same top "
              f"{m[c]['same_top']['value']:.4f}")
    for plain, cal in (("q4km", "q4km_imatrix"), ("int4", "int4_awq")):
        check(m[cal]["kld_mean"]["value"] < m[plain]["kld_mean"]["value"],
              f"{cal}: mean KLD below {plain}'s")
        check(m[cal]["ln_ppl_ratio"]["value"]
              < m[plain]["ln_ppl_ratio"]["value"] + m[plain]["ln_ppl_ratio"]["error"],
              f"{cal}: ln PPL ratio not above {plain}'s plus its error")
session.finish()
