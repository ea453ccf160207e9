"""`evalmesh perplexity --kl-divergence REF_MODEL` (cli/commands/perplexity.c with the template
recipes/perplexity_kld.yaml) on stories260K (../shared/data; skipped without it), with real
processes:
- the model against itself: every KLD and Delta p statistic exactly 0, top-token agreement
  exactly 100%, PPL(Q) = PPL(base), and llama-perplexity's layout on stdout;
- Q8_0 and Q4_0 GGUF files written by `evalmesh run` of a quantize recipe, each as -m against the
  original: Q8_0's mean KLD far below Q4_0's; every printed number is results.json's value; the
  metrics are bit-identical to a compare recipe that quantizes in memory (the same weights: so
  the command line adds nothing to the compare stage that tests/stages/test_compare.py checks
  against NumPy forwards), and bit-identical on 1 and 3 ranks;
- that in-memory recipe on 3 ranks with `records: true`: each rank's per-token records file
  (stages/metrics/pair_records.h) holds its windows in order, one record per scored token, and
  every statistic (values and errors) recomputed from the records in NumPy (kld_numpy.py) matches
  results.json to 1e-12;
- refusals, exit 2 before anything loads: a candidate with another tokenizer family (the demo
  model), and a copy of stories260K whose vocabulary differs in one token (naming the token id and
  both spellings); --print-recipe shows both models' paths (and with --no-mmap, both models'
  mmap: false)."""
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np

from eval_helpers import MPIRUN, EvalSession
from kld_numpy import llama_stats

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "support"))
from checks import check  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "")
MODEL = os.path.join(DATA, "models", "stories260K.gguf")
TEXT = os.path.join(DATA, "text", "tinystories_sample.txt")
DEMO = os.path.join(here, "..", "..", "recipes", "data", "demo-model.gguf")
if not os.path.exists(MODEL):
    print(f"SKIPPED: shared data not found under '{DATA}'")
    sys.exit(77)

session = EvalSession("eval_ppl_kld_")
evalmesh, write = session.evalmesh, session.write
EXCLUDE = "[" + ", ".join(f"blk.{i}.ffn_down.weight" for i in range(5)) + "]"  # rows of 172
CTX = ["-c", "128"]


def kld(model, ref, extra=(), np=None):
    return evalmesh(["perplexity", "-m", model, "--kl-divergence", ref, "-f", TEXT, *CTX,
                     *extra], np=np)


def metrics(res):
    return {k: v for k, v in res["metrics"]["model"].items() if not v.get("timing")} if res else {}


# 1. The model against itself.
rc, out, err, res = kld(MODEL, MODEL)
check(rc == 0 and res is not None, "self: rc", err[-2000:])
m = metrics(res)
nonzero = [k for k in m if k.startswith(("kld", "dp")) and m[k]["value"] != 0]
check(m and not nonzero, "self: every KLD and Delta p statistic exactly 0", str(nonzero))
check(m and m["same_top"]["value"] == 1.0 and m["ln_ppl_ratio"]["value"] == 0
      and m["ppl"]["value"] == m["ppl_base"]["value"], "self: same top 1, PPL(Q) = PPL(base)",
      str(m))
for line in ("====== Perplexity statistics (model, 882 tokens) ======",
             "Mean    KLD:   0.000000 ±   0.000000", "Median  KLD:   0.000000",
             "RMS Δp    :  0.000 ± 0.000 %", "Same top p: 100.000 ± 0.000 %"):
    check(line in out.splitlines(), f"self: prints '{line}'", out[-3000:])

# 2. Q8_0 and Q4_0 files from a quantize recipe.
quant = write("quant.yaml", f"""name: quantize
stages:
  model: {{kind: model, path: {MODEL}}}
  q8: {{kind: quantize, model: model, scheme: Q8_0, exclude: {EXCLUDE}, gguf: q8.gguf}}
  q4: {{kind: quantize, model: model, scheme: Q4_0, exclude: {EXCLUDE}, gguf: q4.gguf}}
""")
rc, out, err, _ = evalmesh(["run", quant])
check(rc == 0, "quantize recipe rc", err[-2000:])
files = {}
for q in ("q8", "q4"):
    files[q] = os.path.join(session.tmp, q + ".gguf")
    shutil.copy(os.path.join(session.tmp, f"run{session.runs}", q + ".gguf"), files[q])

got, printed = {}, {}
for q in ("q8", "q4"):
    rc, out, err, res = kld(files[q], MODEL)
    check(rc == 0 and res is not None, f"{q}: rc", err[-2000:])
    got[q], printed[q] = metrics(res), out
k8 = got["q8"].get("kld_mean", {}).get("value", 1)
k4 = got["q4"].get("kld_mean", {}).get("value", 0)
print(f"mean KLD: Q8_0 {k8}, Q4_0 {k4}")
check(k8 * 20 < k4, "Q8_0's mean KLD far below Q4_0's", f"{k8} vs {k4}")
check(got["q4"].get("same_top", {}).get("value", 1) < got["q8"].get("same_top", {}).get("value", 0)
      <= 1, "Q4_0 agrees on the top token less often than Q8_0", str(got))

# Every printed number is results.json's, in llama-perplexity's units and rounding.
m, out = got["q4"], printed["q4"]
want = {
    "Mean PPL(Q)                   :": f"{m['ppl']['value']:10.6f} ± {m['ppl']['error']:10.6f}",
    "Mean PPL(base)                :":
        f"{m['ppl_base']['value']:10.6f} ± {m['ppl_base']['error']:10.6f}",
    "Cor(ln(PPL(Q)), ln(PPL(base))):": f"{100 * m['ln_ppl_correlation']['value']:6.2f}%",
    "Mean ln(PPL(Q)/PPL(base))     :":
        f"{m['ln_ppl_ratio']['value']:10.6f} ± {m['ln_ppl_ratio']['error']:10.6f}",
    "Mean PPL(Q)/PPL(base)         :":
        f"{m['ppl_ratio']['value']:10.6f} ± {m['ppl_ratio']['error']:10.6f}",
    "Mean PPL(Q)-PPL(base)         :":
        f"{m['ppl_diff']['value']:10.6f} ± {m['ppl_diff']['error']:10.6f}",
    "Mean    KLD:": f"{m['kld_mean']['value']:10.6f} ± {m['kld_mean']['error']:10.6f}",
    "Maximum KLD:": f"{m['kld_max']['value']:10.6f}",
    "99.9%   KLD:": f"{m['kld_p99_9']['value']:10.6f}",
    "Median  KLD:": f"{m['kld_p50']['value']:10.6f}",
    " 1.0%   KLD:": f"{m['kld_p01']['value']:10.6f}",
    "Minimum KLD:": f"{m['kld_min']['value']:10.6f}",
    "Mean    Δp:": f"{100 * m['dp_mean']['value']:6.3f} ± {100 * m['dp_mean']['error']:5.3f} %",
    "Maximum Δp:": f"{100 * m['dp_max']['value']:6.3f}%",
    "75.0%   Δp:": f"{100 * m['dp_p75']['value']:6.3f}%",
    " 0.1%   Δp:": f"{100 * m['dp_p00_1']['value']:6.3f}%",
    "Minimum Δp:": f"{100 * m['dp_min']['value']:6.3f}%",
    "RMS Δp    :": f"{100 * m['dp_rms']['value']:6.3f} ± {100 * m['dp_rms']['error']:5.3f} %",
    "Same top p:": f"{100 * m['same_top']['value']:6.3f} ± {100 * m['same_top']['error']:5.3f} %",
} if m else {}
lines = out.splitlines()
for label, value in want.items():
    check(f"{label} {value}" in lines, f"q4: prints '{label} {value}'",
          "\n".join(l for l in lines if l.startswith(label)))

# The same bits as a compare recipe quantizing in memory over the same windows, on 3 ranks when
# mpirun is there, each writing its per-token records; NumPy recomputes every statistic from them.
inmem = write("inmem.yaml", f"""name: inmem
stages:
  base: {{kind: model, path: {MODEL}}}
  model: {{kind: quantize, model: base, scheme: Q4_0, exclude: {EXCLUDE}}}
  data: {{kind: dataset, tokenizer: base, path: {TEXT}, format: text, protocol: chunked,
         n_ctx: 128}}
  kld: {{kind: compare, reference: base, candidates: [model], data: data, records: true}}
  report: {{kind: report, metrics: kld, outputs: [json]}}
""")
ranks = 3 if MPIRUN else 1
rc, out, err, res = evalmesh(["run", inmem], np=ranks if MPIRUN else None)
check(rc == 0 and metrics(res) == got["q4"], "q4 file = in-memory quantize, bit for bit",
      f"{err[-1000:]}\n{metrics(res).get('kld_mean')} vs {got['q4'].get('kld_mean')}")
records_dir = os.path.join(session.tmp, f"run{session.runs}", "records")
RECORD = np.dtype([("window", "<i8"), ("position", "<i4"), ("target", "<i4"), ("arg_ref", "<i4"),
                   ("arg_cand", "<i4"), ("nll_ref", "<f8"), ("nll_cand", "<f8"), ("kld", "<f8")])
parts = []
for r in range(ranks):
    path = os.path.join(records_dir, f"kld.model.rank{r}.tokens")
    check(os.path.exists(path), f"records of rank {r}", str(os.listdir(records_dir)
                                                           if os.path.isdir(records_dir) else []))
    if not os.path.exists(path):
        continue
    with open(path, "rb") as f:
        header = f.read(208)
        body = f.read()
    check(header[:8] == b"EMPREC01" and int.from_bytes(header[200:204], "little") == 48
          and len(body) % 48 == 0, f"rank {r}: header and whole records", header[:8])
    check(res is not None and header[8:72].rstrip(b"\0").decode() == res["model"]["digest"] and
          header[136:200].decode() == res["dataset"]["sha256"],
          f"rank {r}: the reference's digest and the dataset's sha256", header[8:200])
    parts.append(np.frombuffer(body, dtype=RECORD))
rec = np.concatenate(parts) if parts else np.zeros(0, dtype=RECORD)
n = len(rec)
check(n == got["q4"].get("tokens", {}).get("value"), "records: one per scored token",
      f"{n} vs {got['q4'].get('tokens')}")
windows = np.unique(rec["window"])
check(n and np.array_equal(windows, np.arange(len(windows))) and
      np.all(np.diff(rec["window"]) >= 0) and np.all(rec["position"] >= 64) and
      np.all(rec["position"] < 128), "records: windows 0.. in order, positions in the scored half",
      f"{windows[:5]} {rec['position'].min() if n else None}")
if n:
    dp = np.exp(-rec["nll_cand"]) - np.exp(-rec["nll_ref"])
    same = (rec["arg_ref"] == rec["arg_cand"]).astype(np.float64)
    want = llama_stats(rec["nll_ref"], rec["nll_cand"], rec["kld"], dp, same)
    for key, (value, error) in want.items():
        g = got["q4"].get(key, {})
        check(abs(g.get("value", math.inf) - value) <= 1e-12 * abs(value) + 1e-15,
              f"{key} = NumPy from the records", f"got {g.get('value')}, NumPy {value}")
        if error is not None:
            check(abs(g.get("error", math.inf) - error) <= 1e-9 * error + 1e-15,
                  f"{key} error = NumPy from the records", f"got {g.get('error')}, NumPy {error}")

# 1 and 3 ranks: the same bits.
if MPIRUN:
    for np_ in (1, 3):
        rc, out, err, res = kld(files["q4"], MODEL, np=np_)
        check(rc == 0 and metrics(res) == got["q4"], f"q4 on {np_} rank(s): bit-identical",
              f"{err[-1500:]}\n{metrics(res).get('kld_mean')} vs {got['q4'].get('kld_mean')}")
        check(out.count("====== KL divergence statistics ======") == 1,
              f"{np_} rank(s): rank 0 prints the statistics once", out[-1500:])
else:
    print("mpirun not found: the 1 and 3 rank check is skipped")

# 3. Refusals, exit 2, before any model loads.
rc, out, err, res = kld(DEMO, MODEL)
check(rc == 2 and res is None, "another tokenizer family: exit 2", f"{rc} {err}")
check("different tokenizers" in err and f"model stage 'base' ({os.path.realpath(MODEL)}) has a llama tokenizer"
      in err and "demo-model.gguf) a gpt2 one" in err, "another tokenizer family: message", err)
check("model model:" not in err, "refused before loading a model", err)

# A copy of stories260K with one token spelled differently (same length, so the file stays
# valid): the first differing id is named with both spellings.
with open(MODEL, "rb") as f:
    blob = bytearray(f.read())
token = b"\x07\x00\x00\x00\x00\x00\x00\x00\xe2\x96\x81Once"  # a GGUF string: u64 length, bytes
at = blob.find(token)
check(at > 0, "stories260K spells the token '▁Once'")
blob[at + 11:at + 15] = b"Onc3"
changed = write("changed.gguf", bytes(blob), "wb")
rc, out, err, res = kld(changed, MODEL)
check(rc == 2 and res is None, "one token changed: exit 2", f"{rc} {err}")
m_ = re.search(r"token (\d+) is '▁Once' in model stage 'base' \(.*\) but '▁Onc3' in model stage "
               r"'model' \(.*changed\.gguf\)", err)
check(m_ is not None, "one token changed: names the id and both spellings", err)

# --print-recipe: the template with both paths filled in.
p = subprocess.run([os.environ["EVALMESH_BIN"], "perplexity", "-m", files["q8"],
                    "--kl-divergence", MODEL, "-f", TEXT, "-t", "2", "--no-mmap",
                    "--print-recipe"], capture_output=True, text=True, timeout=60)
check(p.returncode == 0 and "kind: compare" in p.stdout and f"path: {os.path.realpath(MODEL)}\n" in p.stdout
      and f"path: {os.path.realpath(files['q8'])}\n" in p.stdout and "threads: 2" in p.stdout
      and p.stdout.count("mmap: false\n") == 2,
      "--print-recipe fills in both models (--no-mmap: both read into memory) and the compare "
      "stage's threads", p.stdout + p.stderr)
session.finish()
