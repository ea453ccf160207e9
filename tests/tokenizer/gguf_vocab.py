"""A small GGUF metadata reader for the Python reference tokenizers (independent of evalmesh's)."""
import struct

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}


def read_gguf_metadata(path):
    """The metadata of a GGUF file as a dict; strings stay bytes."""
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n]
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(_SCALAR[t])

    assert data[:4] == b"GGUF", path
    pos = 4
    take("I")
    take("Q")
    n_kv = take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string().decode()
        kv[key] = value(take("I"))
    return kv
