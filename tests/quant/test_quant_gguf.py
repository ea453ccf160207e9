"""The quantize stage's GGUF output, read back with the PyPI gguf package (llama.cpp's own Python
reader) and with evalmesh:
- Q4_K_M (embeddings and head included) on an 8-layer model with rows of 256: every tensor has
  the type llama-quantize's rules give (attn_v/ffn_down of layers 0, 3, 6, 7 -> Q6_K, output ->
  Q6_K, the rest Q4_K, norms F32), general.file_type 15 and quantization_version 2, the source's
  other metadata unchanged, and each tensor's bytes are the quantizer's for the source weights;
- Q4_K_M on rows of 64: llama-quantize's fallbacks (Q4_K -> Q5_0, Q6_K -> Q8_0, head -> Q8_0)
  while ffn_down (rows of 256) keeps the K types;
- Q8_0: every tensor's bytes equal gguf.quants.quantize of the source weights;
- the written Q4_K_M and Q8_0 files score exactly as the in-memory models they were written from;
- stories260K (ffn 172) with Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_K_M: llama-quantize's fallbacks
  (type_fallback.h) in the file, one log line per fallback, ffn_down in F16 with NumPy's float16
  bytes; strict: true refuses with the block message (exit 2);
- bad input: GGUF output of a torchao scheme, or from a safetensors source, stops with exit 2.

usage: test_quant_gguf.py MKMODEL QUANT_DUMP
"""
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stages"))
from eval_helpers import EvalSession  # noqa: E402
from checks import check as check_that  # noqa: E402  (tests/support, on the path eval_helpers set)

try:
    from gguf import GGMLQuantizationType as T
    from gguf import GGUFReader, quants
except ImportError:
    print("SKIPPED: the PyPI package gguf is not installed (tools/python-env)")
    sys.exit(77)

MKMODEL, QUANT_DUMP = sys.argv[1], sys.argv[2]
session = EvalSession("quant_gguf_")
evalmesh, write = session.evalmesh, session.write


def check(name, ok, detail=""):
    check_that(ok, name, detail)
text = write("text.txt", "".join(f"Line {i}: pack my box with five dozen liquor jugs.\n"
                                 for i in range(30)))


def mkmodel(name, *args):
    path = os.path.join(session.tmp, name)
    subprocess.run([MKMODEL, "--out", path, "--seed", "5", "--type", "f32", *args], check=True,
                   capture_output=True)
    return path


def run(name, model, opts, score=False):
    """model -> quantize (opts) [-> forward -> aggregate -> report]; returns (rc, err, results)."""
    q = "\n".join(f"    {k}: {v}" for k, v in opts.items())
    body = f"""name: {name}
stages:
  model: {{kind: model, path: "{model}"}}
  q:
    kind: quantize
    model: model
{q}
"""
    if score:
        body += f"""  data: {{kind: dataset, tokenizer: model, path: "{text}", protocol: chunked, n_ctx: 40}}
  fwd: {{kind: forward, model: q, data: data, threads: 1}}
  agg: {{kind: aggregate, inputs: [fwd]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
"""
    rc, out, err, res = evalmesh(["run", write(name + ".yaml", body)])
    return rc, err, res


def score_file(name, path):
    """model (the file) -> forward -> aggregate -> report; returns (rc, err, results)."""
    body = f"""name: {name}
stages:
  model: {{kind: model, path: "{path}"}}
  data: {{kind: dataset, tokenizer: model, path: "{text}", protocol: chunked, n_ctx: 40}}
  fwd: {{kind: forward, model: model, data: data, threads: 1}}
  agg: {{kind: aggregate, inputs: [fwd]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
"""
    rc, _, err, res = evalmesh(["run", write(name + ".yaml", body)])
    return rc, err, res


def exact(res):
    return {k: v["value"] for k, v in res["metrics"]["fwd"].items() if not v.get("timing")}


def tensors(path):
    r = GGUFReader(path)
    return r, {t.name: t for t in r.tensors}


def source_weights(path):
    _, ts = tensors(path)
    return {n: np.array(t.data, dtype=np.float32).reshape(-1, int(t.shape[0])) for n, t in ts.items()}


def our_bytes(scheme, x):
    src, dst = os.path.join(session.tmp, "w.f32"), os.path.join(session.tmp, "w.bin")
    np.ascontiguousarray(x, dtype=np.float32).tofile(src)
    subprocess.run([QUANT_DUMP, scheme, str(x.shape[1]), src, dst], check=True)
    return open(dst, "rb").read()


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def expected_type(name, n_layers, row, base):
    """llama-quantize's choice (src/llama-quant.cpp) for a dense Llama model, written from its
    rules: the head Q6_K (Q8_0 when rows are not a multiple of 256), attn_v and ffn_down Q6_K on
    use_more_bits layers, then K types fall back when the rows do not fill a super-block."""
    if not name.endswith(".weight") or name.endswith("norm.weight"):
        return "F32"
    if name == "output.weight":
        return "Q6_K" if row % 256 == 0 else "Q8_0"
    t = base
    m = re.match(r"blk\.(\d+)\.(attn_v|ffn_down)\.weight", name)
    if m and use_more_bits(int(m.group(1)), n_layers):
        t = "Q6_K"
    if row % 256:
        t = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}[t]
    return t


# Q4_K_M with rows of 256 (dim 256, ffn 512), 8 layers.
big = mkmodel("big.gguf", "--dim", "256", "--ffn", "512", "--layers", "8", "--heads", "4")
out = os.path.join(session.tmp, "big-Q4_K_M.gguf")
rc, err, mix_mem = run("mix", big, {"scheme": "Q4_K_M", "embeddings": "true", "output": "true",
                                    "gguf": out}, score=True)
check("Q4_K_M run", rc == 0 and mix_mem and os.path.exists(out), err[-2000:])
if os.path.exists(out):
    r, ts = tensors(out)
    src_r, _ = tensors(big)
    src = source_weights(big)
    kv = {f.name: f for f in r.fields.values()}
    check("file_type 15", int(kv["general.file_type"].parts[-1][0]) == 15)
    check("quantization_version 2", int(kv["general.quantization_version"].parts[-1][0]) == 2)
    src_kv = {f.name: f for f in src_r.fields.values()}
    same = [k for k in src_kv if not k.startswith("GGUF.") and k not in ("general.file_type",)
            and not all(np.array_equal(a, b) for a, b in zip(src_kv[k].parts, kv[k].parts))]
    check("other metadata unchanged", not same, str(same))
    wrong, differ = [], []
    for name, t in ts.items():
        row = int(t.shape[0])
        want = expected_type(name, 8, row, "Q4_K")
        if name == "token_embd.weight":
            want = "Q4_K"
        if t.tensor_type.name != want:
            wrong.append((name, t.tensor_type.name, want))
        elif want != "F32" and bytes(t.data) != our_bytes(want, src[name]):
            differ.append(name)
    check("Q4_K_M types as llama-quantize", not wrong, str(wrong))
    check("Q4_K_M bytes are the quantizer's", not differ, str(differ))
    rc, err, mix_disk = score_file("mixfile", out)
    check("Q4_K_M file run", rc == 0 and mix_disk, err[-2000:])
    if mix_mem and mix_disk:
        check("written Q4_K_M file scores as the in-memory model", exact(mix_mem) == exact(mix_disk),
              f"{exact(mix_mem)} vs {exact(mix_disk)}")
        print(f"Q4_K_M token ppl {mix_mem['metrics']['fwd']['token_ppl']['value']:.6f}")
    kinds = sorted({t.tensor_type.name for t in ts.values()})
    print(f"Q4_K_M file: {len(ts)} tensors, types {kinds}")
    for name in ("blk.0.attn_v.weight", "blk.1.attn_v.weight", "blk.3.ffn_down.weight",
                 "blk.4.ffn_down.weight", "blk.6.attn_v.weight", "blk.7.ffn_down.weight"):
        print(f"  {name}: {ts[name].tensor_type.name}")

# Q4_K_M with rows of 64: fallbacks; ffn_down's rows (256) keep the K types.
small = mkmodel("small.gguf", "--dim", "64", "--layers", "8")
out = os.path.join(session.tmp, "small-Q4_K_M.gguf")
rc, err, _ = run("mix_small", small, {"scheme": "Q4_K_M", "output": "true", "gguf": out})
check("Q4_K_M small run", rc == 0 and os.path.exists(out), err[-2000:])
if os.path.exists(out):
    _, ts = tensors(out)
    wrong = [(n, t.tensor_type.name) for n, t in ts.items() if n != "token_embd.weight" and
             t.tensor_type.name != expected_type(n, 8, int(t.shape[0]), "Q4_K")]
    check("fallback types as llama-quantize", not wrong, str(wrong))
    check("token_embd kept", ts["token_embd.weight"].tensor_type.name == "F32")
    print("small Q4_K_M:", {n: ts[n].tensor_type.name for n in
                            ("blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight",
                             "blk.1.ffn_down.weight", "output.weight")})

# Q8_0: bytes against gguf's own quantizer, and the file scores as the in-memory model.
out = os.path.join(session.tmp, "small-Q8_0.gguf")
rc, err, mem = run("q8", small, {"scheme": "Q8_0", "embeddings": "true", "gguf": out}, score=True)
check("Q8_0 run", rc == 0 and mem and os.path.exists(out), err[-2000:])
if os.path.exists(out):
    _, ts = tensors(out)
    src = source_weights(small)
    differ = [n for n, t in ts.items() if t.tensor_type.name == "Q8_0" and
              bytes(t.data) != quants.quantize(src[n], T.Q8_0).tobytes()]
    n_q8 = sum(t.tensor_type.name == "Q8_0" for t in ts.values())
    check("Q8_0 tensors: 8 layers x 7 + token_embd", n_q8 == 57, str(n_q8))
    check("Q8_0 bytes equal gguf.quants.quantize", not differ, str(differ))
    rc, err, disk = score_file("q8file", out)
    check("Q8_0 file run", rc == 0 and disk, err[-2000:])
    if mem and disk:
        check("written Q8_0 file scores as the in-memory model", exact(mem) == exact(disk),
              f"{exact(mem)} vs {exact(disk)}")

# stories260K (ffn 172): rows no block of 32 divides. Each scheme falls back as llama-quantize does
# (type_fallback.h), logging each tensor; strict: true refuses with the block message.
BLOCK = {"Q8_0": 32, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "Q4_K": 256, "Q5_K": 256,
         "Q6_K": 256, "F16": 1}


def fallback(wanted, row):
    """llama.cpp's llama_tensor_get_type fallback, F16 where it has none or that does not fit."""
    if row % BLOCK[wanted] == 0:
        return wanted
    used = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}.get(wanted, "F16")
    return used if row % BLOCK[used] == 0 else "F16"


stories = os.path.join(os.environ.get("EVALMESH_SHARED_DATA", "../shared/data"), "models",
                       "stories260K.gguf")
if os.path.exists(stories):
    src = source_weights(stories)
    linear = [n for n in src if re.match(r"blk\.\d+\.(attn_[qkv]|attn_output|ffn_\w+)\.weight$", n)]
    for scheme in ("Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"):
        out = os.path.join(session.tmp, f"stories-{scheme}.gguf")
        rc, err, _ = run(f"fb_{scheme}", stories, {"scheme": scheme, "gguf": out})
        if not check(f"stories260K {scheme}: runs with fallbacks", rc == 0 and os.path.exists(out),
                     err[-2000:]):
            continue
        _, ts = tensors(out)
        want = {}
        for n in linear:
            row = int(ts[n].shape[0])
            wanted = expected_type(n, 5, 256, "Q4_K") if scheme == "Q4_K_M" else scheme
            want[n] = (wanted, fallback(wanted, row), row)
        got = {n: ts[n].tensor_type.name for n in linear}
        check(f"stories260K {scheme}: the fallback types in the file",
              got == {n: w[1] for n, w in want.items()},
              str({n: (got[n], w[1]) for n, w in want.items() if got[n] != w[1]}))
        logged = re.findall(r"quantize: tensor (\S+): rows of (\d+) values are not a multiple of "
                            r"(\w+)'s block of (\d+) values: (\w+) instead \(llama-quantize's "
                            r"fallback\)", err)
        check(f"stories260K {scheme}: one log line per fallback (tensor, wanted, used)",
              sorted(logged) == sorted((n, str(w[2]), w[0], str(BLOCK[w[0]]), w[1])
                                       for n, w in want.items() if w[0] != w[1]),
              "\n".join(map(str, logged)))
        f16 = [n for n in linear if got[n] == "F16"]
        check(f"stories260K {scheme}: ffn_down (rows of 172) in F16",
              sorted(f16) == sorted(f"blk.{i}.ffn_down.weight" for i in range(5)), str(f16))
        differ = [n for n in f16 if bytes(ts[n].data) != src[n].astype(np.float16).tobytes()]
        check(f"stories260K {scheme}: F16 bytes are NumPy's float16 of the weights", not differ,
              str(differ))
    rc, err, _ = run("fb_strict", stories, {"scheme": "Q8_0", "strict": "true"})
    check("stories260K Q8_0 strict: refused (exit 2)", rc == 2, err[-1000:])
    check("stories260K Q8_0 strict: the block message",
          "tensor blk.0.ffn_down.weight: rows of 172 values are not a multiple of Q8_0's block of "
          "32 values" in err and "instead" not in err, err[-1000:])
    out = os.path.join(session.tmp, "stories-Q8_0.gguf")
    if os.path.exists(out):
        rc, err, res = score_file("fb_score", out)
        check("the Q8_0 file with F16 fallbacks scores", rc == 0 and res, err[-1000:])
else:
    print("stories260K.gguf not found: fallback cases skipped")

# Bad input.
rc, err, _ = run("ao", small, {"scheme": "int8_weight_only", "gguf": "x.gguf"})
check("int8 GGUF: exit 2", rc == 2, err[-1000:])
check("int8 GGUF: message", "scheme int8_weight_only has no GGUF type" in err, err[-1000:])
st = mkmodel("st", "--format", "safetensors")
rc, err, _ = run("st", st, {"scheme": "Q8_0", "gguf": "x.gguf"})
check("safetensors GGUF: exit 2", rc == 2, err[-1000:])
check("safetensors GGUF: message", "writing GGUF needs a model loaded from a GGUF file" in err,
      err[-1000:])

session.finish()
