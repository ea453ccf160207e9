"""NumPy dequantizers written from each block layout's definition (ggml-common.h's block structs
and the formulas of stages/quant/quant_legacy.c and quant_kquants.c), and the test inputs the
quantizer tests share. Dequantizing is exact arithmetic on small integers and f16 scales, so these
are independent of the order of operations of any quantizer."""
import numpy as np

# name: (ggml type id, values per block, bytes per block)
SCHEMES = {
    "Q8_0": (8, 32, 34), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
}


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
