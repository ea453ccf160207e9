"""A model is its weights, not its header (stories260K from ../shared/data; skipped without it).

The noisy copy of the model has the same size and the same header bytes (so the same header
sha256) but 3% noise in every weight, written with the `gguf` package. Then:
- `evalmesh perplexity` interrupted with SIGTERM mid-forward (exit 6), the model file replaced by
  the noisy copy, and `evalmesh perplexity --resume RUN_DIR`: refused with exit 2, the message
  naming the digest the records were written for and the file's digest now, no results;
- results.json records the model's digest beside its header sha256, and the digest is the
  XXH3-128 of the file's bytes (as `xxhsum -H2` computes it independently);
- two runs writing one history, one per model: `evalmesh history` shows two different models;
- the same for a Hugging Face checkpoint (the model exported by evalmesh-mkmodel, the argument):
  a copy with noise in model.safetensors's tensor data has the same header sha256 and another
  digest in `evalmesh inspect --json`, the XXH3-128 of config.json, the shard and the tokenizer
  file read in that order.
Sleeps only pace the polling; what is checked never depends on timing."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
from gguf import GGUFReader

from eval_helpers import BIN, EvalSession
from resume_helpers import HEADER, records, shared_data, test_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

MODEL, WIKI = shared_data()
MKMODEL = sys.argv[1]
session = EvalSession("eval_model_identity_")
tmp = session.tmp
ENV = test_env()
clean = os.path.join(tmp, "clean.gguf")
noisy = os.path.join(tmp, "noisy.gguf")
model = os.path.join(tmp, "model.gguf")
shutil.copy(MODEL, clean)
shutil.copy(MODEL, noisy)
shutil.copy(WIKI, os.path.join(tmp, "text.txt"))

# The noisy copy: every F32 weight times (1 + 0.03 n), n standard normal; nothing else changes.
reader = GGUFReader(noisy, "r+")
rng = np.random.default_rng(23)
data_start = min(int(t.data_offset) for t in reader.tensors)
for t in reader.tensors:
    check(t.tensor_type.name == "F32", f"{t.name} is F32", t.tensor_type.name)
    t.data[...] = t.data * (1 + 0.03 * rng.standard_normal(t.data.shape)).astype(np.float32)
del reader
a, b = open(clean, "rb").read(), open(noisy, "rb").read()
check(len(a) == len(b) and a[:data_start] == b[:data_start] and a != b,
      "noisy copy: same size, same header, other weights")


def xxh128(path):
    """XXH3-128 of the file, from xxhsum (Debian's xxhash), independent of evalmesh."""
    out = subprocess.run(["xxhsum", "-H2", path], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


def run(args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600, cwd=tmp, env=ENV)
    return p.returncode, p.stdout, p.stderr


digest = {"clean": xxh128(clean), "noisy": xxh128(noisy)}
check(digest["clean"] != digest["noisy"], "xxhsum tells the copies apart", str(digest))

# 1. perplexity interrupted with SIGTERM once its records show progress, resumed on the noisy copy;
# 3000 windows (of the text's 25,000) keep it in its forward well past the signal, even in the
# optimized build, and the sanitizer build's forward short
shutil.copy(clean, model)
d = os.path.join(tmp, "ppl")
job = subprocess.Popen([BIN, "perplexity", "-m", "model.gguf", "-f", "text.txt", "-c", "32",
                        "--chunks", "3000", "--threads", "1", "--run-dir", "ppl"], cwd=tmp, env=ENV,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.monotonic() + 300
signalled = False
while job.poll() is None and time.monotonic() < deadline and not signalled:
    rec = glob.glob(os.path.join(d, "records", "ppl.rank0.*.bin"))
    if rec and os.path.getsize(rec[0]) > HEADER + 20 * 600:
        job.send_signal(signal.SIGTERM)
        signalled = True
    time.sleep(0.005)
out, err = job.communicate(timeout=600)
check(signalled and job.returncode == 6, "perplexity: SIGTERM mid-forward, exit 6",
      f"rc={job.returncode} {err[-1500:]}")
done = sum(len(records(f)) for f in glob.glob(os.path.join(d, "records", "*.bin")))
check(done > 0, "perplexity: windows recorded before the signal", str(done))

shutil.copy(noisy, model)
rc, out, err = run(["perplexity", "--resume", d])
check(rc == 2, "resume with the noisy weights: exit 2", f"rc={rc} {out[-500:]} {err[-1500:]}")
check("resume refused: the model changed" in err, "resume refused: the model changed", err[-1500:])
check(digest["clean"] in err and digest["noisy"] in err, "the refusal names both digests",
      f"{digest} {err[-1500:]}")
check(not os.path.exists(os.path.join(d, "results.json")), "refused resume: no results")
check("PPL =" not in out, "refused resume: no estimate printed", out[-500:])

# the clean model back: the resume finishes
shutil.copy(clean, model)
rc, out, err = run(["perplexity", "--resume", d])
check(rc == 0 and "Final estimate: PPL =" in out, "resume with the same weights finishes",
      f"rc={rc} {err[-1500:]}")

# 2. a history of one run per model
RECIPE = """name: identity
stages:
  model: {kind: model, path: model.gguf}
  data: {kind: dataset, tokenizer: model, path: text.txt, protocol: chunked, n_ctx: 32, max_windows: 40}
  f: {kind: forward, model: model, data: data, threads: 1}
  agg: {kind: aggregate, inputs: [f]}
  report: {kind: report, metrics: agg, outputs: [json, {type: history, path: h.jsonl}]}
"""
session.write("identity.yaml", RECIPE)
results = {}
for name, path in (("clean", clean), ("noisy", noisy)):
    shutil.copy(path, model)
    rc, _, err = run(["run", "identity.yaml", "--run-dir", "hist-" + name])
    check(rc == 0, f"{name} run", err[-1500:])
    results[name] = json.load(open(os.path.join(tmp, "hist-" + name, "results.json")))["model"]
check(results["clean"].get("header_sha256") == results["noisy"].get("header_sha256"),
      "results: the same header sha256", str(results))
for name in results:
    check(results[name].get("digest") == digest[name], f"results: {name} model digest = xxhsum's",
          f"{results[name]} {digest[name]}")
rc, out, err = run(["history", os.path.join(tmp, "h.jsonl")])
rows = [l for l in out.splitlines() if "model.gguf" in l]
check(rc == 0 and len(rows) == 2, "history: two runs", f"rc={rc} {out} {err}")
check(len(rows) == 2 and digest["clean"][:12] in rows[0] and digest["noisy"][:12] in rows[1],
      "history: each run shows its model's digest", out)
shown = [re.search(r"model\.gguf \((\w+)\)", l) for l in rows]
check(len(rows) == 2 and all(shown) and shown[0].group(1) != shown[1].group(1),
      "history: two models", out)


# 3. a Hugging Face checkpoint: the digest covers the shard's tensor data
hf = {"clean": os.path.join(tmp, "hf-clean"), "noisy": os.path.join(tmp, "hf-noisy")}
p = subprocess.run([MKMODEL, "--from", clean, "--out", hf["clean"]], capture_output=True, text=True)
check(p.returncode == 0, "mkmodel --from: safetensors checkpoint", p.stderr[-1000:])
shutil.copytree(hf["clean"], hf["noisy"])
shard = os.path.join(hf["noisy"], "model.safetensors")
data = bytearray(open(shard, "rb").read())
start = 8 + int.from_bytes(data[:8], "little")  # tensor data after the length and JSON header
weights = np.frombuffer(bytes(data[start:]), dtype=np.float32)
noise = (1 + 0.03 * rng.standard_normal(weights.shape)).astype(np.float32)
data[start:] = (weights * noise).astype(np.float32).tobytes()
open(shard, "wb").write(bytes(data))
inspected = {}
for name, folder in hf.items():
    rc, out, err = run(["inspect", folder, "--json"])
    check(rc == 0, f"inspect {name} checkpoint", err[-1000:])
    inspected[name] = json.loads(out) if rc == 0 else {}
    files = [os.path.join(folder, f) for f in ("config.json", "model.safetensors", "tokenizer.gguf")]
    want = subprocess.run(["xxhsum", "-H2", "-"], input=b"".join(open(f, "rb").read() for f in files),
                          capture_output=True, check=True).stdout.split()[0].decode()
    check(inspected[name].get("digest") == want, f"{name} checkpoint: digest = xxhsum's",
          f"{inspected[name].get('digest')} {want}")
check(inspected["clean"].get("header_sha256") == inspected["noisy"].get("header_sha256") and
      inspected["clean"].get("digest") != inspected["noisy"].get("digest"),
      "checkpoints: the same header sha256, other digests", str(inspected)[:500])

session.finish()
