"""The quantize stage end to end (evalmesh run: model -> quantize -> forward -> aggregate):
- a F32 model quantized in memory to Q8_0 / Q4_0 (embeddings and output head included) scores
  bit-identically to the same weights written as a Q8_0 / Q4_0 GGUF file by evalmesh-mkmodel
  and loaded from it (the quantizers themselves are checked in test_quant_blocks.py);
- by default only the blocks' linear weights are quantized (2 layers x 7 tensors), which scores
  between the F32 model and the fully quantized one, and the same from a safetensors checkpoint;
- two ranks give the metrics of one;
- exclude keeps named tensors (an unknown name is located bad input);
- torchao's int8_weight_only and int4_weight_only run in the forward, close to F32;
- bad input: a block or group the rows do not fill (Q4_K with strict: true or int4 group 128 on
  rows of 64) and an already-quantized model (refused unless allow_requantize) stop the run with
  exit 2 and the place of `scheme`.

usage: test_quant_stage.py MKMODEL
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stages"))
from eval_helpers import MPIRUN, EvalSession  # noqa: E402
from checks import check as check_that  # noqa: E402  (tests/support, on the path eval_helpers set)

MKMODEL = sys.argv[1]
session = EvalSession("quant_stage_")
evalmesh, write = session.evalmesh, session.write


def check(name, ok, detail=""):
    check_that(ok, name, detail)


def mkmodel(name, *args):
    path = os.path.join(session.tmp, name)
    subprocess.run([MKMODEL, "--out", path, "--seed", "11", "--dim", "64", "--layers", "2",
                    *args], check=True, capture_output=True)
    return path


text = write("text.txt", "".join(f"Line {i}: the quick brown fox jumps over the lazy dog.\n"
                                 for i in range(40)))
f32 = mkmodel("f32.gguf", "--type", "f32")
files = {"Q8_0": mkmodel("q8_0.gguf", "--type", "q8_0"), "Q4_0": mkmodel("q4_0.gguf", "--type", "q4_0")}
st_dir = mkmodel("f32_st", "--type", "f32", "--format", "safetensors")


def recipe(name, model, quantize=None):
    """model -> [quantize ->] forward -> aggregate -> report; quantize is a dict of options."""
    q = ""
    source = "model"
    if quantize is not None:
        opts = ", ".join(f"{k}: {v}" for k, v in quantize.items())
        q = f"  q:\n    kind: quantize\n    model: model\n    {opts.replace(', ', chr(10) + '    ')}\n"
        source = "q"
    return write(name, f"""name: {name}
stages:
  model: {{kind: model, path: "{model}"}}
{q}  data: {{kind: dataset, tokenizer: model, path: "{text}", protocol: chunked, n_ctx: 48}}
  fwd: {{kind: forward, model: {source}, data: data, threads: 1}}
  agg: {{kind: aggregate, inputs: [fwd]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")


def ppl(results):
    return results["metrics"]["fwd"]["token_ppl"]["value"] if results else None


def exact(results):
    return {k: v["value"] for k, v in results["metrics"]["fwd"].items() if not v.get("timing")}


rc, out, err, base = evalmesh(["run", recipe("f32.yaml", f32)])
check("f32 run", rc == 0 and base, err[-2000:])
for scheme, path in files.items():
    rc, out, err, mem = evalmesh(["run", recipe(f"mem_{scheme}.yaml", f32, {
        "scheme": scheme, "embeddings": "true", "output": "true"})])
    check(f"{scheme} in memory rc", rc == 0 and mem, err[-2000:])
    check(f"{scheme} log", re.search(rf"quantize q: {scheme}, 16 tensors", err), err[-2000:])
    rc, out, err, disk = evalmesh(["run", recipe(f"disk_{scheme}.yaml", path)])
    check(f"{scheme} file rc", rc == 0 and disk, err[-2000:])
    if mem and disk and base:
        check(f"{scheme}: in memory == mkmodel's file, bit for bit", exact(mem) == exact(disk),
              f"{exact(mem)} vs {exact(disk)}")
        check(f"{scheme}: differs from F32", ppl(mem) != ppl(base))
        print(f"{scheme}: token ppl {ppl(mem):.6f} (file {ppl(disk):.6f}, F32 {ppl(base):.6f})")
    rc, out, err, lin = evalmesh(["run", recipe(f"lin_{scheme}.yaml", f32, {"scheme": scheme})])
    check(f"{scheme} default selection rc", rc == 0 and lin, err[-2000:])
    check(f"{scheme} default selection: 14 tensors",
          re.search(rf"quantize q: {scheme}, 14 tensors", err), err[-2000:])
    rc, out, err, st = evalmesh(["run", recipe(f"st_{scheme}.yaml", st_dir, {"scheme": scheme})])
    check(f"{scheme} safetensors rc", rc == 0 and st, err[-2000:])
    if lin and st and mem and base:
        print(f"{scheme} blocks only: token ppl {ppl(lin):.6f}")
        check(f"{scheme} blocks only: not the F32 or fully quantized result",
              ppl(lin) not in (ppl(base), ppl(mem)))
        check(f"{scheme}: safetensors source == GGUF source", exact(st) == exact(lin))

# torchao's schemes run in the forward directly (no full-precision copy): close to F32.
for scheme, extra, tol in (("int8_weight_only", {}, 0.002), ("int4_weight_only", {"group_size": 32}, 0.1)):
    rc, out, err, res = evalmesh(["run", recipe(f"ao_{scheme}.yaml", f32, {"scheme": scheme, **extra})])
    check(f"{scheme} rc", rc == 0 and res, err[-2000:])
    if res and base:
        print(f"{scheme}: token ppl {ppl(res):.6f}")
        check(f"{scheme}: near F32", ppl(res) != ppl(base) and abs(ppl(res) / ppl(base) - 1) < tol,
              f"{ppl(res)} vs {ppl(base)}")

# Bad input: a group size that does not divide the rows (64).
path = recipe("bad_group.yaml", f32, {"scheme": "int4_weight_only", "group_size": 128})
rc, out, err, _ = evalmesh(["run", path])
check("int4 group 128 on rows of 64: exit 2", rc == 2, f"rc {rc} {err[-2000:]}")
check("int4 group 128 on rows of 64: message",
      re.search(r"bad_group\.yaml:7:13: scheme int4_weight_only_g128: tensor blk\.0\.attn_q\.weight: "
                r"rows of 64 values are not a multiple of int4_weight_only_g128's block of 128", err),
      err[-2000:])

# Two ranks: each quantizes its own copy; the metrics are those of one rank.
if MPIRUN:
    path = recipe("ranks.yaml", f32, {"scheme": "Q4_0"})
    rc1, _, err1, one = evalmesh(["run", path])
    rc2, _, err2, two = evalmesh(["run", path], np=2)
    check("2 ranks rc", rc1 == 0 and rc2 == 0 and one and two, err2[-2000:])
    if one and two:
        check("2 ranks: same metrics as 1", exact(one) == exact(two), f"{exact(one)} vs {exact(two)}")

# exclude: named tensors stay as they are; a name the model lacks is located bad input.
path = recipe("exclude.yaml", f32, {"scheme": "Q8_0", "exclude": "[blk.1.ffn_down.weight,output.weight]"})
rc, out, err, res = evalmesh(["run", path])
check("exclude rc", rc == 0 and res, err[-2000:])
check("exclude: 13 tensors", re.search(r"quantize q: Q8_0, 13 tensors", err), err[-2000:])
path = recipe("exclude_bad.yaml", f32, {"scheme": "Q8_0", "exclude": "[blk.9.ffn_down.weight]"})
rc, out, err, res = evalmesh(["run", path])
check("exclude unknown: exit 2", rc == 2, f"rc {rc} {err[-2000:]}")
check("exclude unknown: message", re.search(r"exclude_bad\.yaml:8:\d+: exclude: the model has no "
                                            r"tensor 'blk\.9\.ffn_down\.weight'", err), err[-2000:])

# Bad input with strict: true (else Q5_0 is used, test_quant_gguf.py): the row length (64) is not a
# multiple of Q4_K's 256-value super-block.
path = recipe("bad_block.yaml", f32, {"scheme": "Q4_K", "strict": "true"})
rc, out, err, _ = evalmesh(["run", path])
check("Q4_K on rows of 64: exit 2", rc == 2, f"rc {rc} {err[-2000:]}")
check("Q4_K on rows of 64: message",
      re.search(r"stage 'q' \(quantize\): \S*bad_block\.yaml:7:13: scheme Q4_K: tensor blk\.0\.attn_q\.weight: "
                r"rows of 64 values are not a multiple of Q4_K's block of 256 values", err),
      err[-2000:])

# Bad input: quantizing an already-quantized model, refused unless allow_requantize.
path = recipe("requant.yaml", files["Q8_0"], {"scheme": "Q4_0"})
rc, out, err, _ = evalmesh(["run", path])
check("requantize refused: exit 2", rc == 2, f"rc {rc} {err[-2000:]}")
check("requantize refused: message",
      re.search(r"stage 'q' \(quantize\): \S*requant\.yaml:7:13: scheme Q4_0: tensor blk\.0\.attn_q\.weight is "
                r"already quantized \(Q8_0\).*allow_requantize: true", err), err[-2000:])
rc, out, err, res = evalmesh(["run", recipe("requant_ok.yaml", files["Q8_0"], {
    "scheme": "Q4_0", "allow_requantize": "true"})])
check("allow_requantize runs", rc == 0 and res, err[-2000:])

session.finish()
