"""Random blocks of ggml tensor types for the tests that compare evalmesh with the gguf package:
random bytes with the scale fields (whose bytes decide the values' range, and which hold the
edge cases of the float formats) set by the caller."""
import numpy as np

# Byte offsets of the f16 scales in each block (ggml-common.h); IQ1_M's f16 is spread over the
# top nibbles of its four u16 scale words (bytes 48..55).
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ4_NL": [0], "IQ4_XS": [0], "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0],
    "IQ3_S": [0], "IQ1_S": [0], "TQ1_0": [52], "TQ2_0": [64],
}


def random_blocks(name, n_blocks, block_bytes, rng, f16, e8m0, ue4m3, count=None):
    """(n_blocks, block_bytes) random bytes; in the first `count` blocks (all by default) the f16
    scales cycle through the bit patterns f16 (F16 and BF16 values too), MXFP4's exponent
    through e8m0 and NVFP4's four scale bytes through ue4m3."""
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    count = n_blocks if count is None else min(count, n_blocks)
    k = np.arange(count)
    halves = np.array(f16, dtype="<u2")
    for i, off in enumerate(F16_FIELDS.get(name, [])):
        raw[k, off:off + 2] = halves[(k + i) % len(halves)].view(np.uint8).reshape(-1, 2)
    if name in ("F16", "BF16"):
        raw[k] = halves[k % len(halves)].view(np.uint8).reshape(-1, 2)
    if name == "IQ1_M":
        for w in range(4):
            top = (halves[k % len(halves)] >> (4 * w)) & 0xF
            raw[k, 49 + 2 * w] = (raw[k, 49 + 2 * w] & 0x0F) | (top << 4).astype(np.uint8)
    if name == "MXFP4":
        raw[k, 0] = np.array(e8m0, dtype=np.uint8)[k % len(e8m0)]
    if name == "NVFP4":
        for s in range(4):
            raw[k, s] = np.array(ue4m3, dtype=np.uint8)[(4 * k + s) % len(ue4m3)]
    return raw
