"""Every row of the architecture table (stages/model/architectures.c) through the forward.

For each case evalmesh-mkmodel writes a small model of the architecture (its tensors, keys and
Q/K row order as llama.cpp writes them) with the features switched on hard enough to matter
(sliding windows shorter than the window scored, soft-caps near the scores' size, head widths
other than dim/heads, MQA, fused projections), and the test checks:
  - the CPU forward (forward_driver, tp = 1) against reference.py's NumPy float64 forward, which
    implements each architecture from its definition: per-token nll within NLL_TOL, perplexity
    within 1e-5 relative, the argmax wherever the reference's best logit leads by 1e-3;
  - that the features bite: the reference without the case's sliding window (or soft-caps)
    gives nll at least 1e-3 away somewhere, so a forward ignoring them would fail;
  - the plain C reference forward against the CPU forward (forward_mesh_driver), and tp = 2
    (where the heads split) and cp = 2 (ring attention; windows of 10 to 40 reach across its
    blocks of 10 positions) under mpirun, within 1e-5 relative;
  - the same model written as a Hugging Face folder (config.json, model.safetensors) gives the
    GGUF file's results bit for bit (names, norm offsets, Q/K order, config keys);
  - the Hugging Face folders against transformers (tests/kernels/transformers_expected.json,
    written by tools/transformers-expected): per-token nll within TRANSFORMERS_TOL, the argmax
    where transformers' best logit leads by 1e-3;
  - bad input: a known architecture missing one of its tensors, an architecture that is not in
    the table, and a config.json whose layer_types contradict the architecture's pattern are exit
    status 2 with the file and the tensor, the list of architectures, or the layer.
Usage: test_forward_architectures.py FORWARD_DRIVER MESH_DRIVER MKMODEL [MPIRUN]"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks as c  # noqa: E402
import reference  # noqa: E402

NLL_TOL = 1e-4
PPL_RTOL = 1e-5
MESH_TOL = 1e-5
TRANSFORMERS_TOL = 1e-4  # both sides float32, summed in different orders
T = 140  # positions of the window checked against NumPy (several attention query blocks)

BASE = ["--vocab", "300", "--dim", "64", "--layers", "3", "--heads", "4", "--kv-heads", "2",
        "--ffn", "160"]
# (label, evalmesh-mkmodel arguments, what the features are: "window", "softcap")
CASES = [
    ("qwen2_f16", BASE + ["--arch", "qwen2", "--type", "f16"], ()),
    ("qwen3_head_dim_48", BASE + ["--arch", "qwen3", "--head-dim", "48"], ()),
    ("qwen3_q8_0", BASE + ["--arch", "qwen3", "--type", "q8_0", "--ffn", "128"], ()),
    ("gemma_mqa_tied", BASE + ["--arch", "gemma", "--kv-heads", "1", "--head-dim", "32",
                               "--tied"], ()),
    ("gemma2_window_softcap", BASE + ["--arch", "gemma2", "--head-dim", "32", "--sliding-window",
                                      "16", "--attn-softcap", "0.5", "--final-softcap", "1.5",
                                      "--tied"], ("window", "softcap")),
    ("gemma2_bf16", BASE + ["--arch", "gemma2", "--type", "bf16", "--sliding-window", "40"],
     ("window",)),
    ("gemma3_local_global", BASE + ["--arch", "gemma3", "--layers", "7", "--kv-heads", "1",
                                    "--head-dim", "24", "--sliding-window", "20",
                                    "--rope-scaling", "linear", "--rope-factor", "8",
                                    "--rope-theta", "1000000"], ("window",)),
    ("phi3_fused_q8_0", ["--arch", "phi3", "--vocab", "300", "--dim", "96", "--layers", "2",
                         "--heads", "3", "--ffn", "192", "--sliding-window", "33", "--type",
                         "q8_0"], ("window",)),
    ("phi3_fused_tp", BASE + ["--arch", "phi3"], ()),
    ("mistral_window", BASE + ["--sliding-window", "10"], ("window",)),
]


def driver_rows(driver, model, ids, score_from):
    p = subprocess.run([driver, model, "2", str(score_from)] + [str(i) for i in ids],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def parse(out):
    rows = [line.split() for line in out.strip().splitlines()]
    return np.array([float(r[1]) for r in rows]), np.array([int(r[2]) for r in rows])


def without(meta, feature):
    """The metadata with the case's feature switched off."""
    meta = dict(meta)
    a = meta["general.architecture"]
    if feature == "window":
        meta["%s.attention.sliding_window" % a] = 0
    else:
        meta["%s.attn_logit_softcapping" % a] = 1e30
        meta["%s.final_logit_softcapping" % a] = 1e30
    return meta


def check_numpy(driver, path, label, features, rng):
    meta, tensors, _ = reference.read_gguf(path)
    ids = rng.integers(0, 300, size=T + 1)
    nll_ref, argmax_ref, logits = reference.forward(meta, tensors, ids[:-1], ids[1:])
    score_from = 5
    rc, out, err = driver_rows(driver, path, ids, score_from)
    if not c.check(rc == 0, "%s: forward_driver exit %d" % (label, rc), err.strip()):
        return None
    nll, argmax = parse(out)
    ref = nll_ref[score_from:]
    diff = np.abs(nll - ref).max()
    ppl, ppl_ref = np.exp(nll.mean()), np.exp(ref.mean())
    top2 = np.sort(logits[score_from:], axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-3
    bad = np.nonzero(clear & (argmax != argmax_ref[score_from:]))[0]
    print("%-24s max |nll - numpy| %.2e  ppl %.6f (numpy %.6f)" % (label, diff, ppl, ppl_ref))
    c.check(diff <= NLL_TOL, "%s: max |nll - numpy| = %g > %g" % (label, diff, NLL_TOL))
    c.check(abs(ppl - ppl_ref) / ppl_ref <= PPL_RTOL,
            "%s: ppl %.9g vs numpy %.9g" % (label, ppl, ppl_ref))
    c.check(len(bad) == 0, "%s: argmax differs at %s" % (label, bad + score_from))
    for feature in features:
        off, _, _ = reference.forward(without(meta, feature), tensors, ids[:-1], ids[1:])
        moved = np.abs(off[score_from:] - ref).max()
        c.check(moved > 1e-3, "%s: the %s does not change the reference (%g)" %
                (label, feature, moved))
    return ids, out


def mesh_rows(mesh, model, tp, out, backend, mpirun=None, cp=1):
    cmd = [mesh, model, str(tp), str(cp), "40", "4", "2", "5", out, backend]
    if tp * cp > 1:
        cmd = [mpirun, "-np", str(tp * cp)] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if not c.check(p.returncode == 0, "%s: exit %d" % (" ".join(cmd), p.returncode),
                   p.stderr[-2000:]):
        return None
    with open(out + ".dp0") as f:
        return [(float(l.split()[2]), int(l.split()[3])) for l in f if l.strip()]


def compare_rows(label, got, want, what):
    if got is None or want is None:
        return
    c.check(len(got) == len(want), "%s: %s: %d rows, expected %d" % (label, what, len(got),
                                                                      len(want)))
    worst = max(abs(g[0] - w[0]) / max(1.0, abs(w[0])) for g, w in zip(got, want))
    print("%-24s %s: worst relative nll difference %.2e" % (label, what, worst))
    c.check(worst <= MESH_TOL, "%s: %s differ by %g" % (label, what, worst))


def last_value(args, option, default):
    """The value of the last `option` in mkmodel's arguments (a later one overrides BASE's)."""
    if option not in args:
        return default
    return int(args[len(args) - args[::-1].index(option)])


def check_mesh(mesh, mpirun, path, args, label, tmp):
    base = os.path.join(tmp, label)
    cpu = mesh_rows(mesh, path, 1, base + ".cpu", "cpu")
    compare_rows(label, cpu, mesh_rows(mesh, path, 1, base + ".ref", "reference"),
                 "cpu vs C reference")
    heads = last_value(args, "--heads", 0)
    kv = last_value(args, "--kv-heads", heads)
    if mpirun and heads % 2 == 0 and kv % 2 == 0:
        compare_rows(label, mesh_rows(mesh, path, 2, base + ".tp2", "cpu", mpirun), cpu,
                     "tp 2 vs tp 1")
    if mpirun:  # ring attention over zig-zag blocks, windows reaching across them
        compare_rows(label, mesh_rows(mesh, path, 1, base + ".cp2", "cpu", mpirun, cp=2), cpu,
                     "cp 2 vs cp 1")


def check_hf(driver, mkmodel, args, label, ids, gguf_out, tmp):
    if "q8_0" in args:
        return
    folder = os.path.join(tmp, label + ".hf")
    p = subprocess.run([mkmodel] + args + ["--format", "safetensors", "--out", folder],
                       capture_output=True, text=True)
    if not c.check(p.returncode == 0, "%s: mkmodel safetensors failed" % label, p.stderr):
        return
    rc, out, err = driver_rows(driver, folder, ids, 5)
    c.check(rc == 0 and out == gguf_out, "%s: the Hugging Face folder's results differ from "
            "the GGUF file's" % label, err.strip())


def check_bad_input(driver, mkmodel, tmp):
    """A llama file relabelled qwen3 (same length, so every key follows) lacks qwen3's q/k norms;
    relabelled 'llamb' it is an architecture with no row."""
    path = os.path.join(tmp, "llama.gguf")
    subprocess.run([mkmodel] + BASE + ["--out", path], check=True, capture_output=True)
    with open(path, "rb") as f:
        data = f.read()
    header = data.index(b"token_embd.weight")  # the metadata ends before the tensor infos
    for name, want in (
            (b"qwen3", "missing tensor blk.0.attn_q_norm.weight"),
            (b"llamb", "unsupported architecture 'llamb' (supported: llama, qwen2, qwen3, gemma, "
                       "gemma2, gemma3, phi3)")):
        bad = os.path.join(tmp, name.decode() + ".gguf")
        with open(bad, "wb") as f:
            f.write(data[:header].replace(b"llama", name) + data[header:])
        rc, _, err = driver_rows(driver, bad, [1, 2, 3], 0)
        c.check(rc == 2 and (bad + ": " + want) in err,
                "%s: exit %d, stderr %r; expected 2 and %r" % (name, rc, err, bad + ": " + want))


def check_bad_layer_types(driver, mkmodel, tmp):
    """A Gemma 2 config.json whose layer_types disagree with the alternating pattern."""
    folder = os.path.join(tmp, "gemma2_layer_types")
    subprocess.run([mkmodel] + BASE + ["--arch", "gemma2", "--sliding-window", "8", "--format",
                                       "safetensors", "--out", folder], check=True,
                   capture_output=True)
    config = os.path.join(folder, "config.json")
    with open(config) as f:
        cfg = json.load(f)
    cfg["layer_types"] = ["sliding_attention", "full_attention", "sliding_attention"]
    with open(config, "w") as f:
        json.dump(cfg, f)
    rc, out, err = driver_rows(driver, folder, [1, 2, 3], 0)
    c.check(rc == 0, "gemma2 layer_types that agree: exit %d" % rc, err)
    cfg["layer_types"][2] = "full_attention"
    with open(config, "w") as f:
        json.dump(cfg, f)
    rc, _, err = driver_rows(driver, folder, [1, 2, 3], 0)
    want = config + ': "layer_types"[2] is not sliding_attention but gemma2\'s pattern makes ' \
        "layer 2 sliding"
    c.check(rc == 2 and want in err, "layer_types: exit %d, stderr %r; expected 2 and %r" %
            (rc, err, want))


def check_transformers(driver, mkmodel, tmp):
    """The forward on Hugging Face folders against transformers' results, committed with the
    script that produced them (tools/transformers-expected)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformers_expected.json")
    with open(path) as f:
        expected = json.load(f)
    for case in expected["cases"]:
        label = "transformers " + case["label"]
        folder = os.path.join(tmp, case["label"] + ".tf")
        p = subprocess.run([mkmodel] + case["mkmodel"] + ["--format", "safetensors", "--out",
                                                          folder], capture_output=True, text=True)
        if not c.check(p.returncode == 0, "%s: mkmodel failed" % label, p.stderr):
            continue
        rc, out, err = driver_rows(driver, folder, case["ids"], 0)
        if not c.check(rc == 0, "%s: forward_driver exit %d" % (label, rc), err.strip()):
            continue
        nll, argmax = parse(out)
        want = np.array(case["nll"])
        diff = np.abs(nll - want).max()
        clear = np.array(case["margin"]) > 1e-3
        bad = np.nonzero(clear & (argmax != np.array(case["argmax"])))[0]
        print("%-36s max |nll - transformers %s| %.2e" % (label, expected["transformers"], diff))
        c.check(diff <= TRANSFORMERS_TOL, "%s: max |nll - transformers| = %g > %g" %
                (label, diff, TRANSFORMERS_TOL))
        c.check(len(bad) == 0, "%s: argmax differs at %s" % (label, bad))


def main():
    driver, mesh, mkmodel = sys.argv[1], sys.argv[2], sys.argv[3]
    mpirun = sys.argv[4] if len(sys.argv) > 4 and os.path.exists(sys.argv[4]) else None
    if not os.path.exists(mkmodel):
        print("SKIPPED: evalmesh-mkmodel is not built")
        sys.exit(77)
    if not mpirun:
        print("mpirun not found: tp = 2 is not checked")
    rng = np.random.default_rng(12)
    with tempfile.TemporaryDirectory() as tmp:
        for label, args, features in CASES:
            path = os.path.join(tmp, label + ".gguf")
            p = subprocess.run([mkmodel] + args + ["--out", path], capture_output=True, text=True)
            if not c.check(p.returncode == 0, "%s: mkmodel failed" % label, p.stderr):
                continue
            got = check_numpy(driver, path, label, features, rng)
            check_mesh(mesh, mpirun, path, args, label, tmp)
            if got:
                check_hf(driver, mkmodel, args, label, got[0], got[1], tmp)
        check_bad_input(driver, mkmodel, tmp)
        check_bad_layer_types(driver, mkmodel, tmp)
        check_transformers(driver, mkmodel, tmp)
    sys.exit(c.finish())


if __name__ == "__main__":
    main()
