"""Calibration statistics computed in NumPy, independent of evalmesh's calibrate stage: the
per-input-channel sums of x^2, sums and max of |x|, and token counts of every linear weight of the
blocks, recorded while tests/kernels/reference.py's float64 forward runs over token windows; and
a writer of those statistics as the importance-matrix GGUF that stages/quant/imatrix_file.h reads
(general.type imatrix; <name>.in_sum2, .counts, .in_sum_abs, .in_max_abs)."""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"))
import reference  # noqa: E402

LINEAR = re.compile(r"blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$")


class _Recorder:
    """Stands for W.T in `x @ W.T`: records x's channels, then multiplies."""
    __array_ufunc__ = None  # makes `ndarray @ recorder` call __rmatmul__

    def __init__(self, stats, name, w):
        self.stats, self.name, self.w = stats, name, w

    @property
    def T(self):
        return self

    def __rmatmul__(self, x):
        s = self.stats.setdefault(self.name, [np.zeros(x.shape[1]), np.zeros(x.shape[1]),
                                              np.zeros(x.shape[1]), 0])
        s[0] += (x * x).sum(axis=0)
        s[1] += np.abs(x).sum(axis=0)
        s[2] = np.maximum(s[2], np.abs(x).max(axis=0))
        s[3] += x.shape[0]
        return x @ self.w.T


class _Tensors(dict):
    def __init__(self, tensors, stats):
        super().__init__(tensors)
        self.stats = stats

    def __getitem__(self, name):
        w = dict.__getitem__(self, name)
        return _Recorder(self.stats, name, w) if LINEAR.match(name) else w


def statistics(meta, tensors, windows):
    """{weight name: (sum_x2, sum_abs, max_abs, count)} over the token windows (lists of ids; the
    forward sees window[:-1])."""
    stats = {}
    t = _Tensors(tensors, stats)
    for w in windows:
        reference.forward(meta, t, np.array(w[:-1]), np.array(w[1:]))
    return {k: (v[0], v[1], v[2], v[3]) for k, v in stats.items()}


def write_imatrix(path, stats, order, chunk_size, dataset="numpy", with_abs=True, columns=None):
    """The statistics as an imatrix GGUF, entries in `order`; columns: {name: n} overrides an
    entry's column count (truncating it), for bad-input tests."""
    import gguf
    w = gguf.GGUFWriter(path, arch="imatrix")
    w.add_string("general.type", "imatrix")
    w.add_array("imatrix.datasets", [dataset])
    count = max(v[3] for v in stats.values())
    w.add_uint32("imatrix.chunk_count", int(count // chunk_size))
    w.add_uint32("imatrix.chunk_size", int(chunk_size))
    for name in order:
        s2, sa, mx, c = stats[name]
        n = (columns or {}).get(name, len(s2))
        w.add_tensor(name + ".in_sum2", s2[:n].astype(np.float32).reshape(1, n))
        w.add_tensor(name + ".counts", np.array([[c]], np.float32))
        if with_abs:
            w.add_tensor(name + ".in_sum_abs", sa[:n].astype(np.float32).reshape(1, n))
            w.add_tensor(name + ".in_max_abs", mx[:n].astype(np.float32).reshape(1, n))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
