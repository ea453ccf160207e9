"""The CPU forward in precision ggml (stages/kernels/cpu/ggml_dot.h) on evalmesh-mkmodel models of
every type it covers (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, the K-quants Q2_K to Q6_K, IQ4_NL, IQ4_XS,
TQ2_0, F16; the Q4_K_M and Q5_K_M mixes; a tied-head model with Q/K/V biases) and on models of
random blocks of each lattice IQ type (IQ2_XXS to IQ1_M), TQ1_0 and MXFP4 (which evalmesh does not
quantize to), and of NVFP4, whose matrices the mode leaves exact, against reference.py's float64 forward whose products
round their inputs as ggml's quantize_row_q8_1_ref does (in float32, written here from
ggml-quants.c: d = amax / 127, q = roundf(x / d) rounding halves away from zero, d and
s = sum(q) * d rounded to fp16 to nearest even) and multiply them with the weights as the PyPI
gguf package dequantizes them, in double; Q4_1 and Q5_1 take the weight block's minimum times s,
as ggml's dot products do; the K-quants read the activations rounded as quantize_row_q8_K_ref
does (256 values, iscale = -127 / the value of largest magnitude, nearest_int rounding halves to
even), and Q4_K's and Q5_K's minima multiply the exact sums of those quants; IQ4_NL and MXFP4
read the 32-value rounding and IQ4_XS, the lattice types and TQ1_0 and TQ2_0 the Q8_K one (their sub-block scales and the
IQ1 deltas are in gguf's dequantized weights); F16 reads them rounded to fp16 (to nearest even, as
GGML_FP32_TO_FP16).
Rounding to 8 bits is discontinuous: a value within float32's error of a rounding tie may round
one way in the C forward (float32) and the other in a float64 reference, and one such value moves
a token's nll by up to 1e-2 on these random models. So each layer's products round the inputs the
C forward gave them (forward_driver --dump, the observer of linear_inputs.h), after checking that
the reference's own inputs agree with those within 1e-5 relative; the output head's input is not
observed, so the tokens whose head input has a value within 3e-6 relative of a rounding tie (of q,
of fp16 d or s) are left out of the nll check (at most half of them may be); an F16 head's input
rounds to fp16, whose ties are too many to leave out (most rows have a value within 3e-6 of one),
so its values that near a tie widen that token's tolerance by the nll's derivative times the fp16
step (first order: the step is 2^-11 of the value).
Checks: per-token nll within 1e-5 of that reference, argmax equal where clear; the ggml results
differ from the exact forward's and from the unrounded reference by much more than that (the
rounding really happened); a model without covered types runs bit for bit as exact; and the
invariance programs in ggml mode: the window bit-identical alone, in batches, after other windows,
on 1, 2 and 16 threads and with each dot-product kernel (c, avx2, avxvnni, avx512vnni, amx).
Usage: test_forward_ggml_precision.py FORWARD_DRIVER FORWARD_INVARIANCE FORWARD_BATCH MKMODEL
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
from gguf_reader import read_gguf_index  # noqa: E402
from test_forward_ggml_types import (made_models, read_with_gguf,  # noqa: E402 (requires gguf)
                                     with_random_matrices)
from gguf import GGMLQuantizationType, GGML_QUANT_SIZES  # noqa: E402

NLL_TOL = 1e-5
INPUT_RTOL = 1e-5  # the reference's layer inputs against the C forward's
TIE_MARGIN = 3e-6  # relative, about 10x the measured input error: closer to a tie is ambiguous
QK = 32
LATTICE = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]
TERNARY = ["TQ1_0", "TQ2_0"]
COVERED = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q6_K", "Q4_K", "Q5_K", "Q3_K", "Q2_K",
           "IQ4_NL", "IQ4_XS", "MXFP4", "F16"} | set(LATTICE) | set(TERNARY)
Q8_K_READERS = ({"Q6_K", "Q4_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_XS"} | set(LATTICE) |
                set(TERNARY))  # Q8_K blocks
WITH_MIN = {"Q4_1", "Q5_1"}  # blocks {f16 d, f16 m, ...}: m at bytes 2..3

BASE = ["--vocab", "300", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
        "--ffn", "512"]
CASES = [(t, BASE + ["--type", t])
         for t in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q6_k", "q4_k", "q4_k_m", "q5_k",
                   "q5_k_m", "q3_k", "q2_k", "iq4_nl", "iq4_xs", "tq2_0", "f16")]
CASES.append(("q4_0_tied_bias", BASE + ["--type", "q4_0", "--tied", "--qkv-bias"]))


def read_model(path):
    """read_with_gguf's (meta, {name: float64 weights}, {name: type name}), and {name: float64
    block minima (n_out, n_in / 32)} for the types with one"""
    meta, tensors, types = read_with_gguf(path)
    data, _, infos, start = read_gguf_index(path)
    minima = {}
    for name, shape, t, off in infos:
        if types[name] in WITH_MIN:
            size = GGML_QUANT_SIZES[GGMLQuantizationType(t)][1]
            rows, blocks = int(np.prod(shape[1:])), shape[0] // QK
            raw = np.frombuffer(data, dtype=np.uint8, count=rows * blocks * size,
                                offset=start + off).reshape(-1, size)
            minima[name] = raw[:, 2:4].copy().view("<f2").astype(np.float64).reshape(rows, blocks)
    return meta, tensors, types, minima


def round_activations(x):
    """x (T, K) as quantize_row_q8_1_ref rounds it: (d * q as float64 (T, K), d (T, K/32),
    s (T, K/32), sum of q (T, K/32), each row's least relative distance to a rounding tie)."""
    T, K = x.shape
    x32 = x.astype(np.float32).reshape(T, K // QK, QK)
    amax = np.abs(x32).max(axis=2)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.zeros_like(d)
    np.divide(np.float32(1), d, out=inv, where=d != 0)
    v = (x32 * inv[..., None]).astype(np.float32).astype(np.float64)
    q = np.trunc(v + np.copysign(0.5, v))  # roundf: halves away from zero (exact in float64)
    qsum = q.sum(axis=2)
    sd = (qsum.astype(np.float32) * d).astype(np.float32)
    d16 = d.astype(np.float16).astype(np.float64)
    s16 = sd.astype(np.float16).astype(np.float64)
    a = np.abs(v)
    tie_q = np.abs(a - np.floor(a) - 0.5) / np.maximum(a, 1.0)
    margin = np.minimum(tie_q.min(axis=2), np.minimum(half_tie(d), half_tie(sd))).min(axis=1)
    return (d16[..., None] * q).reshape(T, K), d16, s16, qsum, margin


def round_activations_k(x):
    """x (T, K) as quantize_row_q8_K_ref rounds it: (d * q as float64 (T, K), each row's least
    relative distance to a rounding tie)."""
    T, K = x.shape
    x32 = x.astype(np.float32).reshape(T, K // 256, 256)
    first = np.abs(x32).argmax(axis=2)  # the first of equal magnitudes, as ggml's strict >
    big = np.take_along_axis(x32, first[..., None], axis=2)[..., 0]
    iscale = np.zeros_like(big)
    np.divide(np.float32(-127), big, out=iscale, where=big != 0)
    v = (x32 * iscale[..., None]).astype(np.float32).astype(np.float64)
    q = np.minimum(np.rint(v), 127.0)  # nearest_int: halves to even
    d = np.zeros_like(iscale)
    np.divide(np.float32(1), iscale, out=d, where=iscale != 0)
    a = np.abs(v)
    tie = (np.abs(a - np.floor(a) - 0.5) / np.maximum(a, 1.0)).min(axis=2).min(axis=1)
    return (d.astype(np.float64)[..., None] * q).reshape(T, K), tie


def half_tie(f):
    """Relative distance of float32 values f to the nearest fp16 rounding tie (inf for 0)."""
    f = np.abs(f.astype(np.float64))
    lo = f.astype(np.float16).astype(np.float64)
    up = np.nextafter(lo.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    down = np.nextafter(lo.astype(np.float16), np.float16(0)).astype(np.float64)
    tie = np.minimum(np.abs(f - (lo + up) / 2), np.abs(f - (lo + down) / 2))
    return np.where(f > 0, tie / np.where(f > 0, f, 1.0), np.inf)


def round_activations_f16(x):
    """x (T, K) rounded to fp16 as float64, and (T, K) the fp16 step of each value within
    TIE_MARGIN (relative) of a tie, which may round the other way in the C forward (0 elsewhere)."""
    x32 = x.astype(np.float32)
    xq = x32.astype(np.float16)
    step = np.abs(np.spacing(xq)).astype(np.float64)
    return xq.astype(np.float64), np.where(half_tie(x32) < TIE_MARGIN, step, 0.0)


SITES = {"attn_q": 0, "attn_k": 0, "attn_v": 0, "attn_output": 1, "ffn_gate": 2, "ffn_up": 2,
         "ffn_down": 3}  # em_linear_site


def read_dump(path):
    """{(layer, site): float32 (T, K)} from forward_driver --dump."""
    raw, out, at = open(path, "rb").read(), {}, 0
    while at < len(raw):
        layer, site, T, K = np.frombuffer(raw, dtype="<i4", count=4, offset=at)
        at += 16
        out[(int(layer), int(site))] = np.frombuffer(raw, dtype="<f4", count=T * K,
                                                     offset=at).reshape(T, K)
        at += 4 * T * K
    return out


def ggml_product(tensors, types, minima, observed=None, seen=None):
    """product(x, name) for reference.forward: ggml's rounding of the input (the C forward's when
    observed has it: seen["input"] keeps the largest relative difference from x, and for the head
    seen["margin"] each row's least distance to a rounding tie), times the weight in double."""
    def product(x, name):
        if types[name] not in COVERED:
            return x @ tensors[name].T
        parts = name.split(".")
        if observed is not None and parts[0] == "blk":
            given = observed[(int(parts[1]), SITES[parts[2]])].astype(np.float64)
            seen["input"] = max(seen["input"], np.abs(x - given).max() / np.abs(given).max())
            x = given
        if types[name] == "F16":  # GGML_FP32_TO_FP16: to nearest even
            xq, steps = round_activations_f16(x)
            margin = np.full(x.shape[0], np.inf)
            if parts[0] != "blk" and seen is not None:
                seen["head_steps"] = (steps, tensors[name])
        elif types[name] in Q8_K_READERS:
            xq, margin = round_activations_k(x)
        else:
            xq, d, s, qsum, margin = round_activations(x)
        if parts[0] != "blk" and seen is not None:
            seen["margin"] = margin
        y = xq @ tensors[name].T
        if name in minima:  # m * s in place of m * d * sum(q)
            y += (s - d * qsum) @ minima[name].T
        return y
    return product


def run_driver(driver, args, label):
    p = subprocess.run([driver] + args, capture_output=True, text=True)
    if not check(p.returncode == 0, "%s: driver exit %d: %s" % (label, p.returncode, p.stderr)):
        return None, None
    rows = np.array([[float(v) for v in line.split()] for line in p.stdout.strip().split("\n")])
    return rows[:, 1], rows[:, 2].astype(int)


def check_model(driver, path, label, rng, tmp):
    meta, tensors, types, minima = read_model(path)
    ids = rng.integers(0, 300, size=65)
    words = [str(i) for i in ids]
    dump = os.path.join(tmp, label + ".inputs")
    nll, argmax = run_driver(driver, ["--ggml", "--dump", dump, path, "2", "0"] + words, label)
    exact, _ = run_driver(driver, [path, "2", "0"] + words, label + " exact")
    if nll is None or exact is None:
        return
    seen = {"input": 0.0, "margin": np.full(len(nll), np.inf)}
    product = ggml_product(tensors, types, minima, read_dump(dump), seen)
    nll_ref, argmax_ref, logits = reference.forward(meta, tensors, ids[:-1], ids[1:],
                                                    product=product)
    nll_plain, _, _ = reference.forward(meta, tensors, ids[:-1], ids[1:])
    clear_head = seen["margin"] > TIE_MARGIN
    allowed = np.full(len(nll), NLL_TOL)
    if "head_steps" in seen:  # an F16 head: each value near a tie may move by its step
        steps, w = seen["head_steps"]
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(nll)), ids[1:]] -= 1.0  # d nll / d logits
        allowed += (steps * np.abs(p @ w)).sum(axis=1)  # first order in the steps
    over = np.abs(nll - nll_ref) - allowed
    diff = np.abs(nll - nll_ref)[clear_head].max()
    moved = np.abs(nll - exact).max()
    plain = np.abs(nll - nll_plain).max()
    top2 = np.sort(logits, axis=1)[:, -2:]
    clear = clear_head & ((top2[:, 1] - top2[:, 0]) > 1e-3)
    bad_argmax = np.nonzero(clear & (argmax != argmax_ref))[0]
    matrix_types = sorted(set(v for k, v in types.items() if tensors[k].ndim == 2))
    print("%-15s %-5s inputs within %.1e, %d/%d tokens max |nll - ref| %.2e (allowed %.2e); "
          "|ggml - exact| %.2e, |ggml - unrounded ref| %.2e; ppl %.6f (exact %.6f)" %
          (label, "+".join(matrix_types), seen["input"], clear_head.sum(), len(nll), diff,
           allowed[clear_head].max(), moved, plain, np.exp(nll.mean()), np.exp(exact.mean())))
    check(seen["input"] <= INPUT_RTOL, "%s: layer inputs differ by %g relative" %
          (label, seen["input"]))
    check(2 * clear_head.sum() >= len(nll), "%s: only %d tokens without a head tie" %
          (label, clear_head.sum()))
    check(over[clear_head].max() <= 0, "%s: max |nll - ref| = %g, more than allowed (%g)" %
          (label, diff, allowed.max()))
    check(len(bad_argmax) == 0, "%s: argmax differs at %s" % (label, bad_argmax))
    if set(matrix_types) & COVERED:
        check(moved > 10 * NLL_TOL and plain > 10 * NLL_TOL,
              "%s: ggml barely differs from exact (%g) or the unrounded reference (%g)" %
              (label, moved, plain))
    else:  # nothing covered: ggml is the exact forward, bit for bit
        check(np.array_equal(nll, exact), "%s: ggml differs from exact without a covered type" %
              label)


def main():
    driver, invariance, batch, mkmodel = sys.argv[1:5]
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in made_models(mkmodel, CASES, tmp):
            check_model(driver, path, label, rng, tmp)
            if label in ("q4_1", "q5_0", "q6_k", "q4_k", "q5_k", "q3_k", "q2_k", "iq4_nl",
                         "iq4_xs", "tq2_0", "f16"):
                for program in (invariance, batch):
                    p = subprocess.run([program, path, "ggml"], capture_output=True, text=True)
                    out = p.stdout.strip().replace("\n", "; ")
                    print("%s ggml on %s: %s" % (os.path.basename(program), label, out))
                    check(p.returncode == 0, "%s: %s ggml failed: %s" %
                          (label, os.path.basename(program), p.stderr.strip()))
        base = os.path.join(tmp, "f32.gguf")
        p = subprocess.run([mkmodel] + BASE + ["--out", base], capture_output=True, text=True)
        check(p.returncode == 0, "mkmodel: %s" % p.stderr.strip())
        for type_name in LATTICE + ["TQ1_0", "MXFP4", "NVFP4"]:
            label, path = "random " + type_name.lower(), os.path.join(tmp, type_name + ".gguf")
            # TQ1_0's values are -1, 0 and 1: a scale of 2^-5, not 2^-12, for a forward that
            # the 8-bit rounding visibly moves
            with_random_matrices(base, path, type_name, rng,
                                 f16=0x2800 if type_name == "TQ1_0" else 0x0C00)
            check_model(driver, path, label, rng, tmp)
            if type_name in ("IQ2_XXS", "IQ1_M", "TQ1_0", "MXFP4"):
                p = subprocess.run([invariance, path, "ggml"], capture_output=True, text=True)
                print("forward_invariance ggml on %s: %s" %
                      (label, p.stdout.strip().replace("\n", "; ")))
                check(p.returncode == 0, "%s: forward_invariance ggml failed: %s" %
                      (label, p.stderr.strip()))
    sys.exit(finish())


if __name__ == "__main__":
    main()
