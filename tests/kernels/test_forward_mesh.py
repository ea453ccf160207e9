"""Tensor and context parallelism of the forward against tp = cp = 1 and the plain C reference.

For stories260K (when present) and models made by evalmesh-mkmodel (GQA and MHA, Q/K/V biases,
tied and untied heads, every weight type), forward_mesh_driver runs the same seeded windows
  - alone with the `cpu` backend (tp = 1) and with the C reference forward,
  - under mpirun with tp = 2 (twice), tp = 2 x dp = 2, tp = 4, cp = 2 (twice), cp = 2 x dp = 2,
    cp = 4 and tp = 2 x cp = 2,
and the test checks:
  - tp = cp = 1 within REF_TOL of the reference (the fast kernels' float sums against doubles);
  - every tp and cp within TP_TOL of tp = cp = 1 per token, the same argmax, and the windows'
    perplexity within 1e-5 relative (tp changes the order of the sums inside Wo and Wdown, cp
    the order of attention's sums, nothing else);
  - repeated runs, and the same tp and cp over dp = 1 or 2, bit-identical;
  - tp = 2 with the windows in one batch (score_batch), and as continuations of their shared
    first SCORE_FROM positions (each pair of windows shares one; the pairs' prefixes in one call,
    score_shared_prefixes), bit-identical to one window at a time, and
    cp = 2 refusing a batch of several windows and a shared prefix (exit status 2);
  - tp = 1 and 2 decoding the windows together with a key-value cache (prefill, then each
    window's own ids fed step by step; cpu-decode): every position's argmax that of one window
    at a time and its nll (from the gathered logits, in double) within DECODE_TOL; tp = 2 x dp = 2
    bit-identical to dp = 1; cp = 2 refusing to decode (exit status 2);
  - each rank's shard of the weights about 1/tp of the whole (the driver reports the bytes).
The sanitizer build (a last argument `sanitizer`) runs the mkmodel cases SANITIZER_CASES only: each
mpirun of its ranks takes seconds to start, and the other cases run the same parallel code with
other weight types, which the optimized build checks.
Usage: test_forward_mesh.py DRIVER MPIRUN [MKMODEL [sanitizer]]"""
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import checks  # noqa: E402

REF_TOL = 1e-5  # |nll - nll_ref| / max(1, |nll_ref|): float kernels against doubles
TP_TOL = 1e-5   # |nll_tp - nll_tp1| / max(1, |nll_tp1|)
PPL_TOL = 1e-5  # relative, perplexity of all the windows
DECODE_TOL = 1e-6  # the decoder's logits in double against the head's float exponentials

T, SCORE_FROM, WINDOWS, SEED = 40, 8, 4, 11

# (label, evalmesh-mkmodel arguments, largest tp to try): shapes whose heads, KV heads and MLP
# columns split 2 and 4 ways (and quantized column slices stay whole blocks of 32); a vocabulary
# of four head tiles (192 rows each) so shards hold different numbers of tiles.
BASE = ["--vocab", "700", "--dim", "128", "--layers", "2", "--heads", "8", "--ffn", "256"]
CASES = [
    ("f32_gqa_untied", BASE + ["--type", "f32", "--kv-heads", "4"], 4),
    ("f32_mha_tied", BASE + ["--type", "f32", "--tied"], 4),
    ("f16_gqa_bias_tied", BASE + ["--type", "f16", "--kv-heads", "4", "--qkv-bias", "--tied"], 4),
    ("bf16_gqa2", BASE + ["--type", "bf16", "--kv-heads", "2"], 2),
    ("q8_0_gqa_bias", BASE + ["--type", "q8_0", "--kv-heads", "4", "--qkv-bias"], 4),
    ("q4_0_gqa_tied", BASE + ["--type", "q4_0", "--kv-heads", "4", "--tied"], 4),
]
SANITIZER_CASES = ("f32_gqa_untied", "q4_0_gqa_tied")


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            w, p, nll, am = line.split()
            rows.append((int(w), int(p), float(nll), int(am)))
    return rows


def run(driver, mpirun, model, tp, cp, ranks, out, backend="cpu"):
    cmd = [driver, model, str(tp), str(cp), str(T), str(SCORE_FROM), str(WINDOWS), str(SEED), out,
           backend]
    if ranks > 1:
        cmd = [mpirun, "-np", str(ranks)] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    return out


def text(out, dp):
    return "".join(open("%s.dp%d" % (out, r)).read() for r in range(dp))


def weights(out, ranks):
    return [int(open("%s.weights.%d" % (out, r)).read()) for r in range(ranks)]


def ppl(rows):
    return math.exp(sum(r[2] for r in rows) / len(rows))


def compare(c, label, got, want, tol, what):
    c.check(len(got) == len(want), "%s: %s: %d tokens, expected %d" % (label, what, len(got), len(want)))
    worst = 0.0
    for g, w in zip(got, want):
        worst = max(worst, abs(g[2] - w[2]) / max(1.0, abs(w[2])))
        c.check(g[3] == w[3], "%s: %s: window %d position %d argmax %d, expected %d"
                % (label, what, g[0], g[1], g[3], w[3]))
    c.check(worst <= tol, "%s: %s: largest relative nll difference %.3g > %.3g" % (label, what, worst, tol))
    return worst


def check_batch(c, driver, mpirun, model, label, tp, cp, out, base):
    """The windows of run `out` (tp x cp on two ranks) as one batch: the same bits with tp, a
    clear refusal with cp."""
    name = "tp %d cp %d" % (tp, cp)
    if cp == 1:
        batch = run(driver, mpirun, model, tp, cp, 2, base + ".batch", "cpu-batch")
        c.check(text(batch, 1) == text(out, 1),
                "%s: %s with the windows in one batch differs from one at a time" % (label, name))
        prefix = run(driver, mpirun, model, tp, cp, 2, base + ".prefix", "cpu-prefix")
        c.check(text(prefix, 1) == text(out, 1),
                "%s: %s with the windows as continuations of their shared prefix differs from one "
                "at a time" % (label, name))
        decode = run(driver, mpirun, model, tp, cp, 2, base + ".decode", "cpu-decode")
        compare(c, label, read(decode + ".dp0"), read(out + ".dp0"), DECODE_TOL,
                name + " decoding vs one window at a time")
        decode_dp2 = run(driver, mpirun, model, tp, cp, 4, base + ".decode_dp2", "cpu-decode")
        c.check(text(decode_dp2, 2) == text(decode, 1),
                "%s: %s x dp 2 decoding differs from dp 1" % (label, name))
        return
    for mode, refusal in (("batch", "scores one window per batch"),
                          ("prefix", "does not score shared prefixes"),
                          ("decode", "does not decode")):
        cmd = [mpirun, "-np", "2", driver, model, str(tp), str(cp), str(T), str(SCORE_FROM),
               str(WINDOWS), str(SEED), base + ".cp" + mode, "cpu-" + mode]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        c.check(p.returncode == 2 and refusal in p.stderr,
                "%s: %s refuses %s of %d windows: exit %d %s"
                % (label, name, mode, WINDOWS, p.returncode, p.stderr[-500:]))


def check_model(c, driver, mpirun, model, label, max_tp, tmp):
    base = os.path.join(tmp, label)
    one = read(run(driver, mpirun, model, 1, 1, 1, base + ".one") + ".dp0")
    ref = read(run(driver, mpirun, model, 1, 1, 1, base + ".ref", "reference") + ".dp0")
    worst_ref = compare(c, label, one, ref, REF_TOL, "tp 1 vs reference")
    decode = read(run(driver, mpirun, model, 1, 1, 1, base + ".decode", "cpu-decode") + ".dp0")
    compare(c, label, decode, one, DECODE_TOL, "tp 1 decoding vs one window at a time")
    whole = weights(base + ".one", 1)[0]
    line = "%s: tp 1 vs reference %.2g" % (label, worst_ref)
    # (tp, cp): dp 1 on tp * cp ranks; for the first of each kind also a second run and dp 2
    for tp, cp in ((2, 1), (4, 1), (1, 2), (1, 4), (2, 2)):
        if tp > max_tp:
            continue
        name = "tp %d cp %d" % (tp, cp)
        out = run(driver, mpirun, model, tp, cp, tp * cp, "%s.tp%dcp%d" % (base, tp, cp))
        rows = read(out + ".dp0")
        worst = compare(c, label, rows, one, TP_TOL, name + " vs tp 1 cp 1")
        compare(c, label, rows, ref, REF_TOL, name + " vs reference")
        rel = abs(ppl(rows) - ppl(one)) / ppl(one)
        c.check(rel <= PPL_TOL, "%s: %s perplexity %.10g vs %.10g (relative %.3g)"
                % (label, name, ppl(rows), ppl(one), rel))
        line += ", %s %.2g (ppl %.2g)" % (name, worst, rel)
        if tp > 1:
            shards = weights(out, tp * cp)
            c.check(max(shards) <= whole * (1.0 / tp + 0.1),
                    "%s: %s shards of %s bytes, the whole is %d" % (label, name, shards, whole))
            line += " weights/rank %.2f" % (max(shards) / whole)
        if tp * cp == 2:
            again = run(driver, mpirun, model, tp, cp, 2, base + ".again")
            c.check(text(again, 1) == text(out, 1), "%s: two %s runs differ" % (label, name))
            dp2 = run(driver, mpirun, model, tp, cp, 4, base + ".dp2")
            c.check(text(dp2, 2) == text(out, 1), "%s: %s x dp 2 differs from dp 1" % (label, name))
            check_batch(c, driver, mpirun, model, label, tp, cp, out, base)
    print(line)


def main():
    driver, mpirun = sys.argv[1], sys.argv[2]
    mkmodel = sys.argv[3] if len(sys.argv) > 3 else ""
    sanitizer = len(sys.argv) > 4 and sys.argv[4] == "sanitizer"
    c = checks
    shared = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
    stories = os.path.join(shared, "models", "stories260K.gguf")
    ran = False
    with tempfile.TemporaryDirectory() as tmp:
        if os.path.exists(stories):
            check_model(c, driver, mpirun, stories, "stories260K", 4, tmp)
            ran = True
        else:
            print("stories260K.gguf not found: skipping it")
        if mkmodel and os.path.exists(mkmodel):
            for label, args, max_tp in CASES:
                if sanitizer and label not in SANITIZER_CASES:
                    continue
                path = os.path.join(tmp, label + ".gguf")
                subprocess.run([mkmodel] + args + ["--out", path], check=True, capture_output=True)
                check_model(c, driver, mpirun, path, label, max_tp, tmp)
            ran = True
    if not ran:
        print("SKIPPED: neither stories260K.gguf nor evalmesh-mkmodel is available")
        sys.exit(77)
    sys.exit(c.finish())


if __name__ == "__main__":
    main()
