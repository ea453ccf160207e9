"""The CPU forward in precision bf16 (stages/kernels/cpu/bf16_dot.h) on evalmesh-mkmodel models
(F32, F16, BF16, Q8_0 matrices; a tied head with Q/K/V biases), against reference.py's float64
forward whose products round, as bf16_dot.h defines, each weight (the PyPI gguf package's
dequantized value, an exact float32) and each input to BF16 (nearest, ties to even, from float32;
denormals to zero), then multiply them in double; attention, norms, RoPE and the rest stay float64
as the exact reference has them.
Rounding to BF16 is discontinuous: an input within float32's error of a rounding tie may round one
way in the C forward and the other in the float64 reference. So each layer's products round the
inputs the C forward gave them (forward_driver --dump), after checking that the reference's own
inputs agree with those within 1e-5 relative (to the row's largest); the output head's input is not
observed, so for each token the values of the reference's head input within 1e-6 (relative to the
row's largest) of a BF16 tie may round either way: the token's nll is checked against the closest
of the reference's nlls over every choice of their sides (at most 2^10).
Checks: per-token nll within 1e-5 of that reference, argmax equal where clear; bf16 differs from
the exact forward and from the unrounded reference by much more than that (the rounding really
happened); and the invariance programs in bf16: the window bit-identical alone, in batches, after
other windows, on 1, 2 and 16 threads, and with each kernel (EVALMESH_CPU_KERNEL c, avx512bf16, avx512;
the ones this CPU lacks are skipped with a message).
Usage: test_forward_bf16_precision.py FORWARD_DRIVER FORWARD_INVARIANCE FORWARD_BATCH MKMODEL
(needs gguf)."""
import os
import subprocess
import sys
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "support"))
import reference  # noqa: E402
from checks import check, finish  # noqa: E402
from test_forward_ggml_types import made_models, read_with_gguf  # noqa: E402 (requires gguf)
from test_forward_ggml_precision import SITES, read_dump, run_driver  # noqa: E402

NLL_TOL = 1e-5
INPUT_RTOL = 1e-5  # the reference's layer inputs against the C forward's
TIE_MARGIN = 1e-6  # relative to the row's largest: closer to a BF16 tie is ambiguous

BASE = ["--vocab", "300", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
        "--ffn", "512"]
CASES = [(t, BASE + ["--type", t]) for t in ("f32", "f16", "bf16", "q8_0")]
CASES.append(("f16_tied_bias", BASE + ["--type", "f16", "--tied", "--qkv-bias"]))


def round_bf16(x):
    """x rounded to float32, then to BF16 as em_bf16_round does, as float64."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000).astype(np.uint32)
    r = np.where((u & 0x7f800000) == 0, (u & 0x80000000).astype(np.uint32), r)
    return r.view(np.float32).astype(np.float64)


def ambiguous_ties(x):
    """The indices of x's values (a row, float64) within TIE_MARGIN of a BF16 rounding tie
    (relative to its largest), and the other side of each tie."""
    x32 = x.astype(np.float32)
    u = x32.view(np.uint32).astype(np.int64)
    tie = np.abs((u & 0xffff) - 0x8000) * np.spacing(np.abs(x32)).astype(np.float64)
    at = np.nonzero(tie <= TIE_MARGIN * np.abs(x32).max())[0]
    down = ((u[at] >> 16) << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    up = (((u[at] >> 16) + 1) << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    near = round_bf16(x32[at])
    return at, np.where(near == down, up, down)


def head_nll(c, x, w, target):
    """A token's nll from its head input x rounded to BF16 and the head w (rounded), as
    reference.forward computes it."""
    logits = reference.softcap(x @ w.T, c["final_cap"])
    m = logits.max()
    return m + np.log(np.exp(logits - m).sum()) - logits[target]


def closest_nll(meta, seen, nll, targets):
    """Per token, the reference nll closest to nll over the sides of its head input's ambiguous
    ties and the one of the nearest sides (head_nll's own, to compare with reference.forward's),
    and how many tokens had any."""
    c = reference.config(meta)
    x, w = seen["head_x"], seen["head_w"]
    out, nearest, ambiguous = np.empty(len(nll)), np.empty(len(nll)), 0
    for t in range(len(nll)):
        at, other = ambiguous_ties(x[t])
        check(len(at) <= 10, "token %d: %d ambiguous head inputs" % (t, len(at)))
        ambiguous += len(at) > 0
        base, best = round_bf16(x[t]), np.inf
        for choice in range(1 << min(len(at), 10)):
            xs = base.copy()
            for i in range(len(at)):
                if choice >> i & 1:
                    xs[at[i]] = other[i]
            ref = head_nll(c, xs, w, targets[t])
            if choice == 0:
                nearest[t] = ref
            best = ref if abs(nll[t] - ref) < abs(nll[t] - best) else best
        out[t] = best
    return out, nearest, ambiguous


def bf16_product(tensors, observed, seen):
    """product(x, name) for reference.forward: the C forward's input (observed) or, for the head,
    x itself (kept as seen["head_x"], the rounded head as seen["head_w"]), and the weight, both
    rounded to BF16, multiplied in double. seen["input"]: the largest difference of x from the
    observed input relative to its largest."""
    weights = {}

    def product(x, name):
        if name not in weights:
            weights[name] = round_bf16(tensors[name])
        parts = name.split(".")
        if parts[0] == "blk":
            given = observed[(int(parts[1]), SITES[parts[2]])].astype(np.float64)
            seen["input"] = max(seen["input"], np.abs(x - given).max() / np.abs(given).max())
            x = given
        else:
            seen["head_x"], seen["head_w"] = x, weights[name]
        return round_bf16(x) @ weights[name].T
    return product


def check_model(driver, path, label, rng, tmp):
    meta, tensors, types = read_with_gguf(path)
    ids = rng.integers(0, 300, size=65)
    words = [str(i) for i in ids]
    dump = os.path.join(tmp, label + ".inputs")
    nll, argmax = run_driver(driver, ["--bf16", "--dump", dump, path, "2", "0"] + words, label)
    exact, _ = run_driver(driver, [path, "2", "0"] + words, label + " exact")
    if nll is None or exact is None:
        return
    seen = {"input": 0.0}
    nll_ref, argmax_ref, logits = reference.forward(
        meta, tensors, ids[:-1], ids[1:], product=bf16_product(tensors, read_dump(dump), seen))
    nll_plain, _, _ = reference.forward(meta, tensors, ids[:-1], ids[1:])
    closest, nearest, ambiguous = closest_nll(meta, seen, nll, ids[1:])
    check(np.abs(nearest - nll_ref).max() <= 1e-9,
          "%s: head_nll differs from reference.forward by %g" %
          (label, np.abs(nearest - nll_ref).max()))
    diff = np.abs(nll - closest).max()
    moved = np.abs(nll - exact).max()
    plain = np.abs(nll - nll_plain).max()
    top2 = np.sort(logits, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-2
    bad_argmax = np.nonzero(clear & (argmax != argmax_ref))[0]
    matrix_types = sorted(set(v for k, v in types.items() if tensors[k].ndim == 2))
    print("%-14s %-5s inputs within %.1e, max |nll - ref| %.2e (%d of %d tokens with a head tie); "
          "|bf16 - exact| %.2e, |bf16 - unrounded ref| %.2e; ppl %.6f (exact %.6f)" %
          (label, "+".join(matrix_types), seen["input"], diff, ambiguous, len(nll), moved,
           plain, np.exp(nll.mean()), np.exp(exact.mean())))
    check(seen["input"] <= INPUT_RTOL, "%s: layer inputs differ by %g relative" %
          (label, seen["input"]))
    check(diff <= NLL_TOL, "%s: max |nll - ref| = %g > %g" % (label, diff, NLL_TOL))
    check(len(bad_argmax) == 0, "%s: argmax differs at %s" % (label, bad_argmax))
    check(moved > 10 * NLL_TOL and plain > 10 * NLL_TOL,
          "%s: bf16 barely differs from exact (%g) or the unrounded reference (%g)" %
          (label, moved, plain))


def main():
    driver, invariance, batch, mkmodel = sys.argv[1:5]
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in made_models(mkmodel, CASES, tmp):
            check_model(driver, path, label, rng, tmp)
            if label in ("f16", "q8_0"):
                for program in (invariance, batch):
                    p = subprocess.run([program, path, "bf16"], capture_output=True, text=True)
                    out = p.stdout.strip().replace("\n", "; ")
                    print("%s bf16 on %s: %s" % (os.path.basename(program), label, out))
                    check(p.returncode == 0, "%s: %s bf16 failed: %s" %
                          (label, os.path.basename(program), p.stderr.strip()))
    sys.exit(finish())


if __name__ == "__main__":
    main()
