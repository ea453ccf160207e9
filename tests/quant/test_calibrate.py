"""The calibrate stage end to end (evalmesh run: model -> dataset -> calibrate):
- the statistics it writes (a llama.cpp GGUF imatrix, read with the PyPI gguf package's
  GGUFReader) name every linear weight (q, k, v, output, gate, up, down of every layer) and hold,
  per input channel, sum x^2, sum |x| and max |x| of that weight's input over every position of
  every window, and the token count, against an independent NumPy float64 forward
  (tests/kernels/reference.py) over the same windows: within RTOL relative to the channel's value
  plus ATOL times the tensor's largest value (the forward computes in float32 in another order;
  the file keeps float32);
- general.type, imatrix.chunk_count, imatrix.chunk_size and imatrix.datasets as llama-imatrix
  writes them, and the legacy .dat (int32 n_entries; name, ncall, nval, float (sum x^2 / count) *
  ncall; chunk count; dataset) parsed here;
- 1, 2 and 3 ranks (mpirun) write bit-identical files (the statistics reduce exactly);
- `from:` an earlier run's GGUF imatrix writes the same bytes again, and `from:` its .dat writes
  the same .dat again (round trips);
- an imatrix as llama-imatrix writes it (made with the gguf package's GGUFWriter: in_sum2,
  counts, in_sum) reads with `from:` and is written again with the same values (no |x| tensors);
  per-expert counts are refused (exit 2); a model quantized with it and one quantized with a file
  of other values (same names and metadata) get different digests in results.json;
- 2 threads write the bytes of 1;
- bad input: text shorter than one window, a `from:` file of another model (a tensor with other
  input channels, then missing tensors), a truncated .dat, a model file as `from:`, both data
  and from, and a mesh with tp = 2 (at `evalmesh validate`), each exit 2 with the reason;
- the log says what was calibrated on how many tokens, and so does results.json ("calibration")
  when the report stage names the calibrate stage in `calibrations`.
Models: one made by evalmesh-mkmodel (always) and ../shared/data/models/stories260K.gguf (GQA;
when present).

usage: test_calibrate.py MKMODEL
"""
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, os.path.join(HERE, "..", "kernels"))
from eval_helpers import BIN, MPIRUN, EvalSession  # noqa: E402
from checks import check, check_equal  # noqa: E402  (tests/support, on the path eval_helpers set)
import reference  # noqa: E402

MKMODEL = sys.argv[1]
RTOL, ATOL = 2e-5, 1e-6
N_CTX = 48
LINEAR = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
session = EvalSession("calibrate_")
evalmesh, write = session.evalmesh, session.write


def mkmodel(name, *args):
    path = os.path.join(session.tmp, name)
    subprocess.run([MKMODEL, "--out", path, "--seed", "11", *args], check=True,
                   capture_output=True)
    return path


def recipe(name, model, cal, tokens=None, threads=1):
    """model -> [dataset ->] calibrate; cal is the calibrate stage's options as YAML flow text."""
    data = (f"  data: {{kind: dataset, tokenizer: model, path: \"{tokens}\", protocol: chunked, "
            f"n_ctx: {N_CTX}, add_bos: false}}\n") if tokens else ""
    return write(name, f"""name: {name.split('.')[0]}
stages:
  model: {{kind: model, path: "{model}"}}
{data}  cal: {{kind: calibrate, model: model, threads: {threads}, {cal}}}
""")


def run_dir():
    return os.path.join(session.tmp, f"run{session.runs}")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def field(reader, key):
    f = reader.fields[key]
    if f.types and f.types[0].name == "ARRAY":
        return [bytes(f.parts[i]).decode() for i in f.data]
    if f.types and f.types[0].name == "STRING":
        return bytes(f.parts[f.data[0]]).decode()
    return f.parts[f.data[0]][0]


def expected(model, ids):
    """Per weight name: (sum x^2, sum |x|, max |x|, tokens) over the chunked windows, NumPy."""
    meta, tensors, _ = reference.read_gguf(model)
    out = {}
    for c in range(len(ids) // N_CTX):
        window = ids[c * N_CTX:(c + 1) * N_CTX]
        inputs = {}
        reference.forward(meta, tensors, window[:-1], window[1:], inputs)
        for name, x in inputs.items():
            if name not in tensors:
                continue
            s = out.setdefault(name, [0.0, 0.0, 0.0, 0])
            s[0] = s[0] + (x * x).sum(axis=0)
            s[1] = s[1] + np.abs(x).sum(axis=0)
            s[2] = np.maximum(s[2], np.abs(x).max(axis=0))
            s[3] += x.shape[0]
    return out


def read_dat(path):
    data = read_bytes(path)
    at = 0

    def i32():
        nonlocal at
        at += 4
        return struct.unpack_from("<i", data, at - 4)[0]

    entries = {}
    for _ in range(i32()):
        length = i32()
        name = data[at:at + length].decode()
        at += length
        ncall, nval = i32(), i32()
        entries[name] = (ncall, np.frombuffer(data, "<f4", nval, at))
        at += 4 * nval
    chunks, length = i32(), i32()
    return entries, chunks, data[at:at + length].decode(), at + length == len(data)


def check_model(label, model, n_layers, vocab):
    rng = np.random.default_rng(5)
    ids = rng.integers(3, vocab, 7 * N_CTX + 5).astype("<u4")  # 7 windows: uneven over 2, 3 ranks
    tokens = os.path.join(session.tmp, f"{label}.u32")
    ids.tofile(tokens)
    path = recipe(f"{label}.yaml", model, f"data: data, dat: {label}.dat", tokens)
    rc, out, err, _ = evalmesh(["run", path])
    check(rc == 0, f"{label}: run", err[-2000:])
    first = run_dir()
    gguf_path, dat_path = os.path.join(first, "cal.imatrix.gguf"), os.path.join(first, f"{label}.dat")
    windows, T = 7, N_CTX - 1
    check(re.search(rf"calibrate cal: {re.escape(tokens)}, {windows} windows of {T} tokens, "
                    rf"{windows * T} tokens, {7 * n_layers} weight tensors", err),
          f"{label}: log line", err[-2000:])
    if rc != 0:
        return

    reader = GGUFReader(gguf_path)
    check_equal(field(reader, "general.type"), "imatrix", f"{label}: general.type")
    check_equal(int(field(reader, "imatrix.chunk_count")), windows, f"{label}: chunk_count")
    check_equal(int(field(reader, "imatrix.chunk_size")), T, f"{label}: chunk_size")
    check_equal(field(reader, "imatrix.datasets"), [tokens], f"{label}: datasets")
    got = {t.name: np.asarray(t.data, dtype=np.float64).reshape(-1) for t in reader.tensors}
    names = [f"blk.{l}.{n}.weight" for l in range(n_layers) for n in LINEAR]
    suffixes = (".in_sum2", ".counts", ".in_sum_abs", ".in_max_abs")
    check_equal(sorted(got), sorted(n + s for n in names for s in suffixes), f"{label}: tensors")
    want = expected(model, ids.astype(np.int64))
    worst = 0.0
    for name in names:
        if name + ".in_sum2" not in got or name not in want:
            check(False, f"{label}: {name} missing")
            continue
        w = want[name]
        check_equal(int(got[name + ".counts"][0]), windows * T, f"{label}: {name} count")
        for suffix, ref in zip((".in_sum2", ".in_sum_abs", ".in_max_abs"), w[:3]):
            g = got[name + suffix]
            err_rel = np.abs(g - ref) / (RTOL * np.abs(ref) + ATOL * np.abs(ref).max())
            worst = max(worst, float(err_rel.max()))
            check(g.shape == ref.shape and err_rel.max() <= 1.0, f"{label}: {name}{suffix}",
                  f"worst channel {np.argmax(err_rel)}: {g[np.argmax(err_rel)]} vs "
                  f"{ref[np.argmax(err_rel)]}")
    print(f"{label}: {len(names)} tensors, worst error {worst:.3f} of the tolerance")

    entries, chunks, dataset, whole = read_dat(dat_path)
    check(whole, f"{label}: .dat has nothing after the dataset name")
    check_equal((sorted(entries), chunks, dataset), (sorted(names), windows, tokens),
                f"{label}: .dat entries, chunks, dataset")
    for name in names:
        ncall, values = entries.get(name, (0, np.zeros(0)))
        want_values = (got[name + ".in_sum2"] / (windows * T) * windows).astype(np.float32)
        check(ncall == windows and np.allclose(values, want_values, rtol=1e-6, atol=0),
              f"{label}: .dat {name}", f"ncall {ncall}")

    if MPIRUN:
        for np_ in (2, 3):
            rc, _, err, _ = evalmesh(["run", path], np=np_)
            check(rc == 0, f"{label}: {np_} ranks", err[-2000:])
            for f in ("cal.imatrix.gguf", f"{label}.dat"):
                other = os.path.join(run_dir(), f)
                check(rc == 0 and read_bytes(other) == read_bytes(os.path.join(first, f)),
                      f"{label}: {f} on {np_} ranks is the bytes of 1 rank")
    else:
        print("EVALMESH_MPIRUN not set: the 2 and 3 rank runs are skipped")

    for source, out_name in ((gguf_path, "cal.imatrix.gguf"), (dat_path, "again.dat")):
        opts = f"from: \"{source}\"" + (", dat: again.dat" if out_name == "again.dat" else "")
        rc, _, err, _ = evalmesh(["run", recipe(f"{label}_from.yaml", model, opts)])
        check(rc == 0, f"{label}: from {os.path.basename(source)}", err[-2000:])
        back = os.path.join(run_dir(), out_name)
        check(rc == 0 and read_bytes(back) == read_bytes(source),
              f"{label}: from {os.path.basename(source)} writes the same bytes")
    return gguf_path, dat_path


small = mkmodel("small.gguf", "--dim", "64", "--layers", "2", "--type", "f32")
small_imatrix, small_dat = check_model("small", small, 2, 258)
stories = os.path.join(HERE, "..", "..", "..", "shared", "data", "models", "stories260K.gguf")
if os.path.exists(stories):
    check_model("stories260K", stories, 5, 512)
else:
    print("stories260K.gguf not found: checked the generated model only")

# The results document names what was calibrated on how many tokens
ids = np.random.default_rng(6).integers(3, 258, 3 * N_CTX).astype("<u4")
tokens = os.path.join(session.tmp, "report.u32")
ids.tofile(tokens)
with open(recipe("report.yaml", small, "data: data", tokens)) as f:
    base = f.read()
path = write("report.yaml", base + """  fwd: {kind: forward, model: model, data: data, threads: 1}
  agg: {kind: aggregate, inputs: [fwd]}
  report: {kind: report, metrics: agg, calibrations: [cal], outputs: [json]}
""")
rc, _, err, results = evalmesh(["run", path])
report_run = run_dir()
check_equal((rc, (results or {}).get("calibration")),
            (0, {"cal": {"dataset": tokens, "windows": 3, "window_tokens": N_CTX - 1,
                         "tokens": 3 * (N_CTX - 1), "tensors": 14}}),
            "results.json calibration entry")

# An imatrix as llama-imatrix writes it (in_sum2, counts, in_sum; no evalmesh extras), made with
# the gguf package: read with `from:` and written again with the same tensors and values
def llama_imatrix(name, counts_per_entry=1, seed=7):
    path = os.path.join(session.tmp, name)
    w = GGUFWriter(path, arch="llama")
    w.add_string("general.type", "imatrix")
    w.add_array("imatrix.datasets", ["wiki.train.raw"])
    w.add_uint32("imatrix.chunk_count", 10)
    w.add_uint32("imatrix.chunk_size", 512)
    rng = np.random.default_rng(seed)
    sums = {}
    for l in range(2):
        for n in LINEAR:
            name = f"blk.{l}.{n}.weight"
            columns = 256 if n == "ffn_down" else 64  # the small model's MLP is 256 wide
            sums[name] = rng.random((counts_per_entry, columns), dtype=np.float32) * 100
            w.add_tensor(name + ".in_sum2", sums[name])
            w.add_tensor(name + ".counts", np.full((counts_per_entry, 1), 5120, np.float32))
            w.add_tensor(name + ".in_sum", sums[name] - 50)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, sums


theirs, their_sums = llama_imatrix("theirs.imatrix.gguf")
rc, _, err, _ = evalmesh(["run", recipe("theirs.yaml", small, f"from: \"{theirs}\"")])
check(rc == 0, "from: a llama-imatrix GGUF", err[-2000:])
if rc == 0:
    reader = GGUFReader(os.path.join(run_dir(), "cal.imatrix.gguf"))
    got = {t.name: np.asarray(t.data).reshape(-1) for t in reader.tensors}
    check_equal(sorted(got), sorted(n + s for n in their_sums for s in (".in_sum2", ".counts")),
                "llama-imatrix GGUF read back: in_sum2 and counts only")
    check(all(np.array_equal(got[n + ".in_sum2"], v.reshape(-1)) and got[n + ".counts"][0] == 5120
              for n, v in their_sums.items()), "llama-imatrix GGUF read back: the same values")
    check_equal((int(field(reader, "imatrix.chunk_count")), int(field(reader, "imatrix.chunk_size")),
                 field(reader, "imatrix.datasets")), (10, 512, ["wiki.train.raw"]),
                "llama-imatrix GGUF read back: chunk count, chunk size, datasets")

# A quantized model's digest covers its statistics: two llama-imatrix files with the same names,
# chunk count, chunk size and dataset but other values make two models (results.json's
# model.digest), and both differ from the digest of the model they were quantized from.
def quantized_digest(imatrix):
    path = write("qdigest.yaml", f"""name: qdigest
stages:
  model: {{kind: model, path: "{small}"}}
  cal: {{kind: calibrate, model: model, from: "{imatrix}"}}
  q: {{kind: quantize, model: model, scheme: Q4_0, imatrix: cal}}
  data: {{kind: dataset, tokenizer: model, path: "{tokens}", protocol: chunked, n_ctx: {N_CTX}, add_bos: false}}
  fwd: {{kind: forward, model: q, data: data, threads: 1}}
  agg: {{kind: aggregate, inputs: [fwd]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")
    rc, _, err, results = evalmesh(["run", path])
    check(rc == 0, f"quantized with {os.path.basename(imatrix)}", err[-2000:])
    return ((results or {}).get("model") or {}).get("digest")


other_values, _ = llama_imatrix("other-values.imatrix.gguf", seed=8)
digests = [quantized_digest(theirs), quantized_digest(other_values)]
inspected = subprocess.run([BIN, "inspect", small, "--json"], capture_output=True, text=True)
source_digest = json.loads(inspected.stdout).get("digest") if inspected.returncode == 0 else None
check(all(d and re.fullmatch("[0-9a-f]{32}", d) for d in digests) and digests[0] != digests[1]
      and source_digest not in digests, "quantized models: one digest per statistics",
      f"{digests} from {source_digest}")

experts, _ = llama_imatrix("experts.imatrix.gguf", counts_per_entry=2)
rc, _, err, _ = evalmesh(["run", recipe("experts.yaml", small, f"from: \"{experts}\"")])
check(rc == 2 and "tensor 'blk.0.attn_q.weight.counts' holds 2 counts (one per expert): "
      "per-expert statistics are not supported" in err, "from: per-expert counts: exit 2",
      f"rc {rc}: {err[-1000:]}")

# Results do not depend on the thread count
rc, _, err, _ = evalmesh(["run", recipe("threads.yaml", small, "data: data", tokens, threads=2)])
check(rc == 0, "threads 2", err[-2000:])
check(rc == 0 and read_bytes(os.path.join(run_dir(), "cal.imatrix.gguf")) ==
      read_bytes(os.path.join(report_run, "cal.imatrix.gguf")),
      "2 threads write the bytes of 1 thread")

# Bad input
short = os.path.join(session.tmp, "short.u32")
np.arange(3, 3 + N_CTX - 1, dtype="<u4").tofile(short)
rc, _, err, _ = evalmesh(["run", recipe("short.yaml", small, "data: data", short)])
check(rc == 2 and f"fewer than one chunk of n_ctx = {N_CTX} tokens" in err,
      "text shorter than one window: exit 2", f"rc {rc}: {err[-1000:]}")

wider = mkmodel("wider.gguf", "--dim", "128", "--layers", "2", "--type", "f32")
rc, _, err, _ = evalmesh(["run", recipe("other.yaml", wider, f"from: \"{small_imatrix}\"")])
check(rc == 2 and re.search(r"entry 'blk\.0\.attn_q\.weight' has 64 input channels, but the "
                            r"tensor of model .*wider\.gguf has 128", err),
      "from: another model's file: exit 2 naming the tensor", f"rc {rc}: {err[-1000:]}")
deeper = mkmodel("deeper.gguf", "--dim", "64", "--layers", "3", "--type", "f32")
rc, _, err, _ = evalmesh(["run", recipe("deeper.yaml", deeper, f"from: \"{small_imatrix}\"")])
check(rc == 2 and re.search(r"has no entry for tensor 'blk\.2\.attn_q\.weight' of model", err),
      "from: a file without the model's tensors: exit 2 naming it", f"rc {rc}: {err[-1000:]}")
truncated = write("truncated.dat", read_bytes(small_dat)[:100], "wb")
rc, _, err, _ = evalmesh(["run", recipe("truncated.yaml", small, f"from: \"{truncated}\"")])
check(rc == 2 and re.search(r"truncated\.dat: entry 1 \('blk\.0\.attn_q\.weight'\): its 64 values "
                            r"run past the end of the file", err),
      "from: a truncated .dat: exit 2 naming the entry", f"rc {rc}: {err[-1000:]}")
rc, _, err, _ = evalmesh(["run", recipe("model_as.yaml", small, f"from: \"{small}\"")])
check(rc == 2 and "small.gguf: a GGUF file but not an imatrix" in err,
      "from: a model file: exit 2", f"rc {rc}: {err[-1000:]}")
with open(recipe("tp.yaml", small, "data: data, mesh: mesh", short)) as f:
    text = f.read().replace("  data: {kind: dataset, tokenizer: model,",
                            "  mesh: {kind: mesh, tp: 2}\n  data: {kind: dataset, mesh: mesh, "
                            "tokenizer: model,")
p = subprocess.run([BIN, "validate", write("tp.yaml", text)], capture_output=True, text=True)
rc, err = p.returncode, p.stderr
check(rc == 2 and re.search(r"tp\.yaml:\d+:\d+: stage 'cal': mesh 'mesh' has tp = 2, but "
                            r"calibrate computes whole windows", err),
      "a mesh with tp = 2: exit 2 at validation", f"rc {rc}: {err[-1000:]}")
rc, _, err, _ = evalmesh(["run", recipe("both.yaml", small,
                                        f"data: data, from: \"{small_imatrix}\"", short)])
check(rc == 2 and "give either `data:`" in err and "not both" in err,
      "data and from: exit 2", f"rc {rc}: {err[-1000:]}")

session.finish()
