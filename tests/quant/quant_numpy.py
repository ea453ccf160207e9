"""NumPy dequantizers written from each block layout's definition (ggml-common.h's block structs
and the formulas of stages/quant/quant_legacy.c and quant_kquants.c), and the test inputs the
quantizer tests share. Dequantizing is exact arithmetic on small integers and f16 scales, so these
are independent of the order of operations of any quantizer."""
import struct

import numpy as np

# name: (ggml type id, values per block, bytes per block)
SCHEMES = {
    "Q8_0": (8, 32, 34), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
}
# torchao's schemes: evalmesh's own type ids (stages/formats/torchao_types.h)
TORCHAO = {"int8_weight_only": (200, 32, 36), "int4_weight_only_g32": (201, 32, 20),
           "int4_weight_only_g64": (202, 64, 36), "int4_weight_only_g128": (203, 128, 68),
           "int4_weight_only_g256": (204, 256, 132)}


def bf16_bits(x):
    """float32 scalar -> the bits of the nearest bfloat16 (ties to even)."""
    u = np.uint64(np.float32(x).view(np.uint32))
    return np.uint16((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16))


def bf16_round(x):
    return np.uint32(np.uint32(bf16_bits(x)) << np.uint32(16)).view(np.float32)


def torchao_quantize(name, x):
    """torchao's definitions in float32 NumPy (rows of x): int8_weight_only is torchao's
    choose_qparams_affine/quantize_affine with MappingType.SYMMETRIC over each row; int4 is
    torchtune's get_groupwise_affine_qparams + groupwise_affine_quantize_tensor_from_qparams
    with bf16 scales and zeros. Returns the blocks in evalmesh's layout."""
    x = np.asarray(x, dtype=np.float32)
    out = []
    if name == "int8_weight_only":
        for row in x:
            s = np.float32(np.abs(row).max()) / np.float32(127.5)
            s = max(s, np.float32(np.finfo(np.float32).eps))
            q = np.clip(np.rint(row * (np.float32(1.0) / s)), -128, 127).astype(np.int8)
            for b in range(len(row) // 32):
                out.append(np.float32(s).tobytes() + q[32 * b:32 * b + 32].tobytes())
        return b"".join(out)
    g = TORCHAO[name][1]
    for grp in x.reshape(-1, g):
        rng = grp.max() - grp.min()
        s = bf16_round(max(rng, np.float32(1e-6)) / np.float32(15))
        z = bf16_round(grp.min() + s * np.float32(8))
        lo = bf16_round(z - s * np.float32(8))
        q = np.clip(np.rint((grp - lo) / s), 0, 15).astype(np.uint8)
        qs = q[:g // 2] | q[g // 2:] << 4
        out.append(struct.pack("<HH", bf16_bits(s), bf16_bits(z)) + qs.tobytes())
    return b"".join(out)


def torchao_dequantize(name, data):
    """x = s * q (int8) or (q - 8) * s + z (int4), from the layouts' definitions."""
    _, g, bb = TORCHAO[name]
    b = np.frombuffer(data, np.uint8).reshape(-1, bb)
    if name == "int8_weight_only":
        return (b[:, :4].copy().view(np.float32).astype(np.float64) *
                b[:, 4:].view(np.int8)).ravel()
    s = (b[:, :2].copy().view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    z = (b[:, 2:4].copy().view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    q = np.concatenate([b[:, 4:] & 0xF, b[:, 4:] >> 4], axis=1).astype(np.float64)
    return ((q - 8) * s + z).ravel()


def f16(b):
    return b.view(np.float16).astype(np.float32)


def nibbles(qs):
    """(blocks, 16) bytes -> (blocks, 32): low nibbles are values 0..15, high ones 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)


def fifth_bits(qh):
    """(blocks, 4) bytes of a little-endian u32 -> (blocks, 32) bits, bit j = value j."""
    bits = qh.copy().view("<u4").reshape(-1, 1) >> np.arange(32, dtype=np.uint32)
    return (bits & 1).astype(np.int32)


def k4_scales(sc):
    """Q4_K/Q5_K: 12 packed bytes -> (blocks, 8) scales and mins of 6 bits."""
    sc = sc.astype(np.int32)
    d = np.zeros((sc.shape[0], 8), np.int32)
    m = np.zeros((sc.shape[0], 8), np.int32)
    for j in range(8):
        if j < 4:
            d[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            d[:, j] = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return d, m


def dequantize(name, data):
    """The float values of the blocks in data (bytes), as a flat float64 array."""
    _, bv, bb = SCHEMES[name]
    b = np.frombuffer(data, np.uint8).reshape(-1, bb)
    if name == "Q8_0":
        return (f16(b[:, :2]) * b[:, 2:].view(np.int8).astype(np.float64)).ravel()
    if name == "Q4_0":
        return (f16(b[:, :2]).astype(np.float64) * (nibbles(b[:, 2:]) - 8)).ravel()
    if name == "Q4_1":
        return (f16(b[:, :2]).astype(np.float64) * nibbles(b[:, 4:]) + f16(b[:, 2:4])).ravel()
    if name == "Q5_0":
        q = nibbles(b[:, 6:]) | fifth_bits(b[:, 2:6]) << 4
        return (f16(b[:, :2]).astype(np.float64) * (q - 16)).ravel()
    if name == "Q5_1":
        q = nibbles(b[:, 8:]) | fifth_bits(b[:, 4:8]) << 4
        return (f16(b[:, :2]).astype(np.float64) * q + f16(b[:, 2:4])).ravel()
    if name in ("Q4_K", "Q5_K"):
        d, dmin = f16(b[:, 0:2]).astype(np.float64), f16(b[:, 2:4]).astype(np.float64)
        sc, mn = k4_scales(b[:, 4:16])
        qs = b[:, 48:] if name == "Q5_K" else b[:, 16:]
        out = np.zeros((b.shape[0], 256))
        for c in range(4):  # 64 values: sub-block 2c from low nibbles, 2c+1 from high nibbles
            chunk = qs[:, 32 * c:32 * c + 32].astype(np.int32)
            for half, q in ((0, chunk & 0xF), (1, chunk >> 4)):
                j = 2 * c + half
                if name == "Q5_K":
                    q = q | ((b[:, 16:48].astype(np.int32) >> j) & 1) << 4
                out[:, 32 * j:32 * j + 32] = d * sc[:, j:j + 1] * q - dmin * mn[:, j:j + 1]
        return out.ravel()
    if name == "Q6_K":
        ql, qh = b[:, :128].astype(np.int32), b[:, 128:192].astype(np.int32)
        sc = b[:, 192:208].view(np.int8).astype(np.float64)
        d = f16(b[:, 208:210]).astype(np.float64)
        out = np.zeros((b.shape[0], 256))
        for h in range(2):
            l_, hh = ql[:, 64 * h:64 * h + 64], qh[:, 32 * h:32 * h + 32]
            parts = [(l_[:, :32] & 0xF) | ((hh >> 0) & 3) << 4,
                     (l_[:, 32:] & 0xF) | ((hh >> 2) & 3) << 4,
                     (l_[:, :32] >> 4) | ((hh >> 4) & 3) << 4,
                     (l_[:, 32:] >> 4) | ((hh >> 6) & 3) << 4]
            for k, q in enumerate(parts):
                pos = 128 * h + 32 * k
                for s in range(2):  # 16-value sub-blocks
                    is_ = 8 * h + 2 * k + s
                    out[:, pos + 16 * s:pos + 16 * s + 16] = (
                        d * sc[:, is_:is_ + 1] * (q[:, 16 * s:16 * s + 16] - 32))
        return out.ravel()
    raise KeyError(name)


def test_matrix():
    """Rows of 512 values (a multiple of every block): random weights of several shapes and the
    blocks that exercise edge cases (all zero, constant, ties of magnitude, exact halves, tiny,
    one-signed, outliers)."""
    rng = np.random.default_rng(20261203)
    rows = [rng.standard_normal(512) * 0.02, rng.standard_normal(512) * 3.0,
            rng.uniform(-1, 1, 512), rng.standard_normal(512) * 0.05,
            np.zeros(512), np.full(512, 1.0), np.full(512, -3.5),
            np.abs(rng.standard_normal(512)), -np.abs(rng.standard_normal(512)),
            rng.standard_normal(512) * 1e-6, np.arange(512) % 64 - 31.5,
            np.tile(np.array([2.0, -2.0] * 16), 16), np.tile(np.array([-2.0, 2.0] * 16), 16),
            np.tile(np.arange(32, dtype=np.float64) + 0.5, 16)]
    spiky = rng.standard_normal(512) * 0.02
    spiky[::37] *= 100
    rows.append(spiky)
    for _ in range(9):
        rows.append(rng.standard_normal(512) * rng.uniform(0.001, 2))
    return np.array(rows, dtype=np.float32)


def test_importance():
    """A fixed importance vector for the 512 columns of test_matrix() (what an imatrix holds: mean
    x^2 per input column): log-normal over several decades, one 32-column block of zeros (columns
    no calibration token reached) and one of equal values."""
    rng = np.random.default_rng(20261204)
    w = rng.lognormal(0.0, 1.5, 512)
    w[64:96] = 0.0
    w[160:192] = 0.25
    return w.astype(np.float32)
