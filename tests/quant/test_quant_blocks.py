"""evalmesh's quantizers (stages/quant) against independent references:
  - byte for byte against ggml's own reference quantizers (quantize_row_*_ref of llama.cpp's
    ggml-quants.c; bytes committed in ggml_reference/ by make_ggml_reference.sh) for every scheme,
    and against ggml's importance-weighted quantizers (quantize_<type> with an imatrix, as
    llama-quantize --imatrix runs them) with the fixed weights of importance.f32;
  - importance-weighted int4: never a larger weighted error than plain int4, per group;
  - byte for byte against the PyPI gguf package's NumPy quantizers (gguf.quants.quantize) for the
    schemes it has (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), on the committed input and on fresh random rows;
  - against blocks computed by hand for all-zero and constant blocks, ties of magnitude and exact
    halves;
  - the torchao types' row functions in the type table give the definitions' floats bit for bit;
  - dequantize(quantize(x)): the NumPy dequantizers of quant_numpy.py (written from each layout's
    definition) agree with gguf's dequantizers, and the error stays within each scheme's bound.

usage: test_quant_blocks.py QUANT_DUMP DEQUANTIZE_DRIVER
"""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from checks import check, finish  # noqa: E402
from quant_numpy import (SCHEMES, TORCHAO, dequantize, test_importance, test_matrix,  # noqa: E402
                         torchao_dequantize, torchao_quantize)

QUANT_DUMP = sys.argv[1]
DEQUANTIZE_DRIVER = sys.argv[2]  # tests/model's: a type's row function, by name
TMP = tempfile.mkdtemp(prefix="quant_blocks_")


def quantize(scheme, x, qw=None):
    """evalmesh's blocks of the rows of x (float32, rows of x.shape[-1]); with qw (one weight per
    column), the scheme's importance-weighted form."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    src, dst = os.path.join(TMP, "in.f32"), os.path.join(TMP, "out.bin")
    x.tofile(src)
    extra = []
    if qw is not None:
        extra = [os.path.join(TMP, "qw.f32")]
        np.asarray(qw, np.float32).tofile(extra[0])
    subprocess.run([QUANT_DUMP, scheme, str(x.shape[-1]), src, dst] + extra, check=True)
    with open(dst, "rb") as f:
        return f.read()


def f16_bytes(v):
    return np.float16(v).tobytes()


def check_ggml_reference():
    ref = os.path.join(HERE, "ggml_reference")
    x = np.fromfile(os.path.join(ref, "input.f32"), dtype=np.float32).reshape(-1, 512)
    check(np.array_equal(x, test_matrix()), "ggml_reference/input.f32 is test_matrix()")
    for scheme in SCHEMES:
        with open(os.path.join(ref, scheme + ".bin"), "rb") as f:
            expected = f.read()
        got = quantize(scheme, x)
        if not check(got == expected, f"{scheme}: bytes equal ggml's quantize_row_*_ref"):
            bb = SCHEMES[scheme][2]
            first = next(i for i in range(len(got)) if got[i] != expected[i])
            print(f"  first difference in block {first // bb}, byte {first % bb}")


def check_ggml_imatrix_reference():
    ref = os.path.join(HERE, "ggml_reference")
    x = np.fromfile(os.path.join(ref, "input.f32"), dtype=np.float32).reshape(-1, 512)
    qw = np.fromfile(os.path.join(ref, "importance.f32"), dtype=np.float32)
    check(np.array_equal(qw, test_importance()), "ggml_reference/importance.f32 is test_importance()")
    for scheme in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"):
        with open(os.path.join(ref, scheme + ".imatrix.bin"), "rb") as f:
            expected = f.read()
        got = quantize(scheme, x, qw)
        if not check(got == expected, f"{scheme}: bytes equal ggml's quantize_{scheme} with the "
                     "importance weights"):
            bb = SCHEMES[scheme][2]
            first = next(i for i in range(len(got)) if got[i] != expected[i])
            print(f"  first difference in block {first // bb}, byte {first % bb}")
        # the weighted fit is a different quantization: most blocks change
        check(got != quantize(scheme, x), f"{scheme}: the importance weights change the blocks")
    # round trip: the NumPy dequantizers read the weighted blocks, and on the random rows the
    # importance-weighted squared error is well below the plain blocks' (what the weights are for)
    rows = list(range(4)) + list(range(x.shape[0] - 9, x.shape[0]))
    xr = x[rows].astype(np.float64)
    for scheme in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"):
        plain = dequantize(scheme, quantize(scheme, xr)).reshape(xr.shape)
        weighted = dequantize(scheme, quantize(scheme, xr, qw)).reshape(xr.shape)
        e_plain = float(((xr - plain) ** 2 * qw).sum())
        e_weighted = float(((xr - weighted) ** 2 * qw).sum())
        check(e_weighted < 0.8 * e_plain, f"{scheme}: weighted round-trip error {e_weighted:.4g} "
              f"below 0.8 x plain's {e_plain:.4g}")
        print(f"  {scheme} with importance weights: weighted squared error {e_weighted / e_plain:.3f} "
              f"of the plain blocks'")
    # Q8_0 has no weighted form: ggml ignores the weights, and so does evalmesh
    with open(os.path.join(ref, "Q8_0.bin"), "rb") as f:
        check(quantize("Q8_0", x, qw) == f.read(), "Q8_0: importance weights ignored, as by ggml")


def check_int4_imatrix():
    """Weighted int4: per group, sum qw (x - dequantized)^2 never above plain int4's, lower on
    most groups of random rows; all-equal weights never do worse either."""
    rng = np.random.default_rng(15)
    x = np.concatenate([test_matrix(), (rng.standard_normal((8, 512)) * 0.05).astype(np.float32)])
    for qw, label in ((test_importance(), "log-normal weights"),
                      (np.ones(512, np.float32), "equal weights")):
        for name in ("int4_weight_only_g32", "int4_weight_only_g128"):
            g = TORCHAO[name][1]
            plain = torchao_dequantize(name, quantize(name, x)).reshape(x.shape)
            weighted = torchao_dequantize(name, quantize(name, x, qw)).reshape(x.shape)
            w = qw.astype(np.float64)
            e_plain = ((x - plain) ** 2 * w).reshape(-1, g).sum(axis=1)
            e_weighted = ((x - weighted) ** 2 * w).reshape(-1, g).sum(axis=1)
            check(np.all(e_weighted <= e_plain * (1 + 1e-5) + 1e-30),
                  f"{name}, {label}: weighted error <= plain int4's in every group")
            better = np.mean(e_weighted < e_plain * (1 - 1e-3))
            check(better > 0.5, f"{name}, {label}: lower weighted error in {better:.0%} of groups")
            print(f"  {name}, {label}: total weighted error {e_weighted.sum():.4g} vs plain "
                  f"{e_plain.sum():.4g}")


def check_gguf():
    try:
        from gguf import GGMLQuantizationType as T
        from gguf import quants
    except ImportError:
        print("SKIP part: the PyPI package gguf is not installed (tools/python-env)")
        return False
    from importlib.metadata import version
    print(f"gguf {version('gguf')}")
    rng = np.random.default_rng(5)
    inputs = [test_matrix(), (rng.standard_normal((64, 256)) * 0.03).astype(np.float32),
              rng.uniform(-4, 4, (16, 4096)).astype(np.float32)]
    for scheme in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        for i, x in enumerate(inputs):
            expected = quants.quantize(x, T[scheme]).tobytes()
            check(quantize(scheme, x) == expected, f"{scheme}: input {i} equals gguf.quants")
    for scheme in SCHEMES:  # gguf's dequantizers read every layout: ours must agree
        x = test_matrix()
        blocks = quantize(scheme, x)
        ours = dequantize(scheme, blocks)
        theirs = quants.dequantize(np.frombuffer(blocks, np.uint8).reshape(x.shape[0], -1),
                                   T[scheme]).astype(np.float64).ravel()
        check(np.allclose(ours, theirs, rtol=1e-6, atol=1e-30),
              f"{scheme}: layout read by quant_numpy equals gguf.quants.dequantize")
    return True


def block(values):
    return np.array(values, dtype=np.float32).reshape(1, 32)


def check_hand_blocks():
    zero, one, neg = block([0] * 32), block([1.0] * 32), block([-3.5] * 32)
    z16 = bytes(16)
    cases = [
        # all zero: d = 0, so 1/d is taken as 0 and q is the offset
        ("Q8_0", zero, bytes(34)),
        ("Q4_0", zero, f16_bytes(-0.0) + b"\x88" * 16),  # d = 0 / -8 = -0
        ("Q4_1", zero, bytes(4) + z16),
        ("Q5_0", zero, f16_bytes(-0.0) + b"\xff" * 4 + z16),  # q = 16: fifth bit set
        ("Q5_1", zero, bytes(8) + z16),
        # constant 1: Q8_0 d = 1/127, q = 127; Q4_0 d = 1/-8, q = 1*(-8) + 8.5 -> 0; Q4_1 d = 0, m = 1
        ("Q8_0", one, f16_bytes(1 / 127) + b"\x7f" * 32),
        ("Q4_0", one, f16_bytes(-0.125) + z16),
        ("Q4_1", one, bytes(2) + f16_bytes(1.0) + z16),
        ("Q5_0", one, f16_bytes(-1 / 16) + bytes(4) + z16),
        ("Q5_1", one, bytes(2) + f16_bytes(1.0) + bytes(4) + z16),
        ("Q4_1", neg, bytes(2) + f16_bytes(-3.5) + z16),
        # ties of magnitude: the first of +2/-2 gives the sign of d; the value of the other sign
        # maps to 16.5 and is clamped to 15 (values j and j + 16 share byte j)
        ("Q4_0", block([2.0, -2.0] * 16), f16_bytes(-0.25) + b"\x00\xff" * 8),
        ("Q4_0", block([-2.0, 2.0] * 16), f16_bytes(0.25) + b"\x00\xff" * 8),
    ]
    # exact halves: amax 127 so d = 1 and q = roundf(x), halves away from zero
    halves = [127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5] + [0.0] * 24
    q = [127, 1, 2, 3, -1, -2, -3, 127] + [0] * 24
    cases.append(("Q8_0", block(halves), f16_bytes(1.0) + struct.pack("32b", *q)))
    for scheme, x, expected in cases:
        got = quantize(scheme, x)
        check(got == expected, f"{scheme} of {x[0, :4].tolist()}...: {got.hex()} == {expected.hex()}")


# Largest |x - dequantized x| a block may have, from the scheme's definition. Legacy blocks:
# x ~ q * d_exact within half a step (one step where Q4_0/Q5_0 clamp the end opposite the
# extreme), stored with d (and m) rounded to f16, which moves q * d by q * |d_exact - d|.
# K-quants: the sub-block step is at most the super-block's spread / nmax, and the 6-bit
# (Q6_K: 8-bit) scales and mins add at most half a step more; the bound is one step.
def max_error(scheme, x, raw):
    f16 = lambda b: float(b.view(np.float16)[0])
    lo, hi = float(x.min()), float(x.max())
    amax = float(np.abs(x).max())
    if scheme == "Q8_0":
        de = amax / 127
        return 0.5 * de + 127 * abs(de - abs(f16(raw[:2])))
    if scheme in ("Q4_0", "Q5_0"):
        qmax = 8 if scheme == "Q4_0" else 16
        de = amax / qmax
        return de + qmax * abs(de - abs(f16(raw[:2])))
    if scheme in ("Q4_1", "Q5_1"):
        qmax = 15 if scheme == "Q4_1" else 31
        de = (hi - lo) / qmax
        return 0.5 * de + qmax * abs(de - f16(raw[:2])) + abs(lo - f16(raw[2:4]))
    spread = max(hi, 0.0) - min(lo, 0.0)
    return {"Q4_K": spread / 15, "Q5_K": spread / 31, "Q6_K": amax / 32}[scheme]


def check_round_trip():
    x = test_matrix()
    for scheme, (_, bv, bb) in SCHEMES.items():
        blocks = quantize(scheme, x)
        y = dequantize(scheme, blocks).reshape(-1, bv)
        xb = x.astype(np.float64).reshape(-1, bv)
        raw = np.frombuffer(blocks, np.uint8).reshape(-1, bb)
        worst, underflow = 0.0, 0
        for i in range(xb.shape[0]):
            if np.abs(xb[i]).max() < 1e-4 and bv == 256:
                # super-block scales in f16's subnormal range: only absolute accuracy is left
                underflow += 1
                check(np.abs(y[i] - xb[i]).max() < 1e-4, f"{scheme}: tiny block {i} within 1e-4")
                continue
            err = np.abs(xb[i] - y[i]).max()
            limit = max_error(scheme, xb[i], raw[i]) * (1 + 1e-6) + 1e-30
            worst = max(worst, err / limit)
        check(worst <= 1.0, f"{scheme}: round trip within the bound (worst {worst:.3f} of it)")
        rel = np.sqrt(np.mean((xb[:8] - y[:8]) ** 2) / np.mean(xb[:8] ** 2))
        print(f"  {scheme}: relative RMS error on the first rows {rel:.4f}, worst error "
              f"{worst:.3f} of the bound, {underflow} tiny super-blocks")


def check_torchao():
    rng = np.random.default_rng(9)
    inputs = [test_matrix(), (rng.standard_normal((16, 1024)) * 0.02).astype(np.float32)]
    for name, (_, g, _) in TORCHAO.items():
        for i, x in enumerate(inputs):
            got = quantize(name, x)
            check(got == torchao_quantize(name, x), f"{name}: input {i} equals the NumPy definition")
        x = test_matrix()
        y = torchao_dequantize(name, quantize(name, x)).reshape(x.shape[0], -1)
        if name == "int8_weight_only":  # half a step of the row's scale (at least FLT_EPSILON)
            step = np.maximum(np.abs(x).max(axis=1, keepdims=True) / 127.5, np.finfo(np.float32).eps)
            bound = step * 0.5 + np.abs(x).max(axis=1, keepdims=True) * 2.0 ** -20  # f32 ulps
            err = np.abs(x - y).max(axis=1, keepdims=True)
        else:  # half a step of the group's bf16 scale, plus the bf16 rounding of the zero point
            xg, yg = x.reshape(-1, g).astype(np.float64), y.reshape(-1, g)
            rngs = np.maximum(xg.max(axis=1) - xg.min(axis=1), 1e-6)
            bound = (rngs / 15 * (0.5 + 2.0 ** -8) * 1.02 + np.abs(xg).max(axis=1) * 2.0 ** -8
                     + rngs * 2.0 ** -7)
            err = np.abs(xg - yg).max(axis=1)
        check(np.all(err <= bound), f"{name}: round trip within the bound "
              f"(worst {np.max(err / bound):.3f} of it)")
    # the forward's row functions (the type table's to_float) against the definition, bit for bit
    # (float32, the same operations: s * q; (q - 8) * s + z)
    for name, type_name in (("int8_weight_only", "TORCHAO_I8"), ("int4_weight_only_g32", "TORCHAO_I4_G32"),
                            ("int4_weight_only_g64", "TORCHAO_I4_G64"),
                            ("int4_weight_only_g128", "TORCHAO_I4_G128"),
                            ("int4_weight_only_g256", "TORCHAO_I4_G256")):
        blocks = quantize(name, test_matrix())
        p = subprocess.run([DEQUANTIZE_DRIVER, type_name, "c"], input=blocks, capture_output=True)
        if not check(p.returncode == 0, f"{type_name}: driver: {p.stderr}"):
            continue
        ours = np.frombuffer(p.stdout, dtype=np.float32)
        bb = TORCHAO[name][2]
        b = np.frombuffer(blocks, np.uint8).reshape(-1, bb)
        if name == "int8_weight_only":
            want = b[:, :4].copy().view(np.float32) * b[:, 4:].view(np.int8).astype(np.float32)
        else:
            s_ = (b[:, :2].copy().view("<u2").astype(np.uint32) << 16).view(np.float32)
            z_ = (b[:, 2:4].copy().view("<u2").astype(np.uint32) << 16).view(np.float32)
            q = np.concatenate([b[:, 4:] & 0xF, b[:, 4:] >> 4], axis=1).astype(np.float32)
            want = (q - np.float32(8)) * s_ + z_
        check(np.array_equal(ours.view(np.uint32), want.astype(np.float32).ravel().view(np.uint32)),
              f"{type_name}: the table's row function gives the definition's floats")

    # hand-computed: s = 127.5 / 127.5 = 1, halves round to even, 127.5 -> 128 clamps to 127
    row = np.array([127.5, 0.5, 1.5, 2.5, -0.5, -2.5, -127.5, 3.0] + [0.0] * 24, np.float32)
    q = [127, 0, 2, 2, 0, -2, -128, 3] + [0] * 24
    check(quantize("int8_weight_only", row.reshape(1, 32)) ==
          np.float32(1.0).tobytes() + struct.pack("32b", *q), "int8: hand-computed row")
    check(quantize("int8_weight_only", np.zeros((1, 32), np.float32)) ==
          np.float32(np.finfo(np.float32).eps).tobytes() + bytes(32), "int8: zero row, s = eps")
    # int4 constant group: range 0 -> s = bf16(1e-6 / 15), z = bf16(c + 8 s); q = round((c - lo)/s)
    for c in (0.0, 1.0, -3.5):
        blk = quantize("int4_weight_only_g32", np.full((1, 32), c, np.float32))
        y = torchao_dequantize("int4_weight_only_g32", blk)
        check(np.all(np.abs(y - c) <= abs(c) * 2.0 ** -8 + 1e-6), f"int4: constant {c} group")


check_ggml_reference()
check_ggml_imatrix_reference()
check_int4_imatrix()
check_hand_blocks()
check_torchao()
check_round_trip()
check_gguf()
sys.exit(finish())
