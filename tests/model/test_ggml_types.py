"""The tensor-type table against the PyPI gguf package (an independent implementation of ggml's
formats): every type gguf knows has the same id, block size and bytes per block in the table,
and every type evalmesh computes with dequantizes random blocks to exactly gguf's floats, bit
for bit, except that a NaN may be any NaN: IEEE leaves the sign and payload of a NaN product
open, compilers turn x * -1.f into a negation (which flips a NaN's sign), F16C quiets signaling
NaNs and NumPy does not, so ggml builds differ there too. The blocks are random bytes with the
scale fields also set to edge values (zero, -0, the smallest and largest subnormals, the smallest
normal, the largest finite, infinities, NaN; E8M0 exponents 0, 1, 2, 254, 255 for MXFP4, UE4M3
0, 0x7F, subnormals and 0xFF for NVFP4). Types with an AVX2 row function are checked on both
paths.
Usage: test_ggml_types.py DEQUANTIZE_DRIVER (needs gguf: see gguf_package.py)."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_package import require_gguf  # noqa: E402

require_gguf()
import warnings  # noqa: E402
from gguf import GGMLQuantizationType, GGML_QUANT_SIZES, quants  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402
from ggml_blocks import random_blocks  # noqa: E402

F16_EDGES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0x7C00,
             0xFC00, 0x7E00, 0x1400, 0x0200]
E8M0_EDGES = [0, 1, 2, 127, 254, 255]

# UE4M3 bytes: zero, E4M3's NaN 0x7F (also zero), the top bit (ignored), subnormals, the largest
UE4M3_EDGES = [0, 0x7F, 0xFF, 0x80, 1, 7, 8, 0x7E, 0x3F, 0x40, 0x77, 0x78, 0x81, 0xF9, 0xFE]


def table(driver):
    out = subprocess.run([driver, "--list"], capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.split("\n"):
        if line:
            name, tid, block, size, computable, avx2 = line.split()
            rows[name] = (int(tid), int(block), int(size), computable == "1", avx2 == "1")
    return rows


def check_type(driver, name, path, block, size, rng):
    n_blocks = 4096 if block == 1 else (2048 if block == 32 else 512)
    raw = random_blocks(name, n_blocks, size, rng, F16_EDGES, E8M0_EDGES, UE4M3_EDGES,
                        count=3 * len(F16_EDGES))  # the first blocks carry the edge scales
    p = subprocess.run([driver, name, path], input=raw.tobytes(), capture_output=True)
    if not check(p.returncode == 0, "%s: driver exit %d: %s" % (name, p.returncode, p.stderr)):
        return
    ours = np.frombuffer(p.stdout, dtype=np.float32)
    qtype = GGMLQuantizationType[name]
    theirs = quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
    if not check(ours.size == theirs.size,
                 "%s: %d floats, gguf %d" % (name, ours.size, theirs.size)):
        return
    a, b = ours.view(np.uint32), theirs.view(np.uint32)
    nan_both = np.isnan(ours) & np.isnan(theirs)
    bad = np.nonzero((a != b) & ~nan_both)[0]
    print("%-8s %-4s %7d values, %d NaN, %d differ in bits" %
          (name, path, ours.size, int(nan_both.sum()), len(bad)))
    if len(bad):
        i = bad[0]
        check(False, "%s (%s): value %d (block %d) is %r (0x%08x), gguf %r (0x%08x); block bytes %s" %
              (name, path, i, i // block, ours[i], a[i], theirs[i], b[i],
               raw[i // block].tobytes().hex()))


def main():
    warnings.simplefilter("ignore", RuntimeWarning)  # gguf's inf * 0 and NaN arithmetic
    driver = sys.argv[1]
    rows = table(driver)
    # the table against gguf's GGML_QUANT_SIZES: every type gguf knows, same id and sizes
    for qtype, (block, size) in GGML_QUANT_SIZES.items():
        if qtype.name == "Q8_1":
            size = 36  # gguf-py says 40, from an old layout; ggml's block_q8_1 is 4 + 32 bytes
        row = rows.get(qtype.name)
        check(row is not None and row[:3] == (int(qtype), block, size),
              "%s: table row %s, gguf says id %d, %d values in %d bytes" %
              (qtype.name, row, int(qtype), block, size))
    rng = np.random.default_rng(12)
    # ggml's types only: evalmesh's own rows (torchao's schemes, ids 200+) have no gguf
    # dequantizer and are checked against NumPy definitions in tests/quant
    computable = [name for name, row in rows.items()
                  if row[3] and name in GGMLQuantizationType.__members__]
    print("computable types:", " ".join(computable))
    print("with AVX2 row functions on this CPU:",
          " ".join(name for name, row in rows.items() if row[4]) or "none")
    for name in computable:
        tid, block, size, _, avx2 = rows[name]
        for path in ["c", "avx2"] if avx2 else ["c"]:
            check_type(driver, name, path, block, size, rng)
    sys.exit(finish())


if __name__ == "__main__":
    main()
