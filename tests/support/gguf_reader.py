"""An independent GGUF reader for the Python tests: the header, metadata and tensor table of a
v2/v3 file, read with struct from the GGUF definition and sharing no code with evalmesh's C
loader. Callers turn each tensor's bytes into what they check (raw bytes, dequantized NumPy)."""
import struct

# GGUF metadata value type id -> struct format (8 = string and 9 = array are read apart)
GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
               10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    """Little-endian values read one after another from bytes (or a memoryview)."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = bytes(self.data[self.pos:self.pos + n]).decode("utf-8", "replace")
        self.pos += n
        return s

    def value(self, t):
        if t in GGUF_SCALAR:
            return self.take(GGUF_SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError("bad GGUF value type %d" % t)


def read_gguf_index(path):
    """Reads the GGUF file at path. Returns (data, meta, infos, start): data the file's bytes,
    meta {key: value}, infos [(name, shape innermost first, ggml type id, offset)] in file order,
    and start the offset in data where the (aligned) tensor data begins; a tensor's bytes begin
    at start + offset."""
    data = open(path, "rb").read()
    assert data[:4] == b"GGUF", path
    r = Reader(data)
    r.pos = 4
    version = r.take("<I")
    assert version in (2, 3), "%s: GGUF version %d" % (path, version)
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        shape = [r.take("<Q") for _ in range(n_dims)]
        infos.append((name, shape, r.take("<I"), r.take("<Q")))
    align = meta.get("general.alignment", 32)
    start = (r.pos + align - 1) // align * align
    return data, meta, infos, start
