"""What the Python benchmarks (tools/bench-tasks, tools/bench-generate) share: a process timed
whole with its peak RSS, the tools/ scripts that fetch or build a reference, the machine line, and
the 110M benchmark model with the Llama 2 vocabulary of the shared data."""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("EVALMESH_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
# 110M: dim 768, 12 layers, 12 heads, ffn 2048, vocab 32000, tied embeddings (bench-forward's)
SIZE_110M = "--dim 768 --layers 12 --heads 12 --ffn 2048 --vocab 32000 --tied".split()
LLAMA_SPM = os.path.join(SHARED, "tokenizers", "llama-spm", "ggml-vocab-llama-spm.gguf")


class Run:
    """One process, timed whole: its stdout and stderr, wall seconds and peak RSS (MiB). A
    failure ends the benchmark (`name` says which) with the output's tail."""

    def __init__(self, name, cmd, env=None, cwd=None):
        self.name = name
        # a random model's generated text need not be UTF-8: its bytes are read as replacements
        with tempfile.TemporaryFile("w+", errors="replace") as out, \
                tempfile.TemporaryFile("w+", errors="replace") as err:
            start = time.monotonic()
            p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd, text=True)
            _, status, usage = os.wait4(p.pid, 0)
            self.wall = time.monotonic() - start
            out.seek(0)
            err.seek(0)
            self.out, self.err = out.read(), err.read()
        self.rc = os.waitstatus_to_exitcode(status)
        self.peak_rss = usage.ru_maxrss / 1024.0
        if self.rc != 0:
            sys.exit(f"{name}: {' '.join(cmd)} failed ({self.rc}):\n" +
                     "\n".join((self.out + self.err).splitlines()[-20:]))

    def find(self, pattern):
        m = re.search(pattern, self.out + self.err)
        if not m:
            sys.exit(f"{self.name}: no line matches {pattern!r} in:\n" +
                     "\n".join((self.out + self.err).splitlines()[-20:]))
        return m


def setup_tool(name, cmd, what):
    """Runs a tools/ script that prints a path; None (with its message) when it skips (77)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode == 77:
        print(f"{name}: no {what}, left out", flush=True)
        return None
    if p.returncode != 0:
        sys.exit(f"{name}: {' '.join(cmd)} failed ({p.returncode})")
    return p.stdout.strip().splitlines()[-1]


def machine_line():
    """The CPU, its cores and the load average, for the head of a report."""
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    return (f"machine: {os.cpu_count()} cores, {cpu}; load average "
            f"{' '.join(open('/proc/loadavg').read().split()[:3])} (the figures are only as quiet "
            f"as the machine)")


# types evalmesh-mkmodel has no quantizer for: the F32 model's matrices quantized by the gguf
# package (ggml's reference quantizers in NumPy)
GGUF_QUANTIZED = {"mxfp4": "MXFP4", "tq1_0": "TQ1_0"}


def make_110m(mkmodel, path, weight_type):
    """Writes the 110M benchmark model (random weights) with the Llama 2 vocabulary; False when
    the shared data lacks the vocabulary."""
    if not os.path.exists(LLAMA_SPM):
        return False
    made = path + ".f32" if weight_type in GGUF_QUANTIZED else path
    subprocess.run([mkmodel, "--out", made, *SIZE_110M, "--type",
                    "f32" if made != path else weight_type, "--tokenizer", LLAMA_SPM],
                   check=True, stdout=subprocess.DEVNULL)
    if made != path:
        quantize_with_gguf(made, path, GGUF_QUANTIZED[weight_type])
        os.remove(made)
    return True


def quantize_with_gguf(src, dst, type_name):
    """Copies the GGUF file src to dst with every matrix quantized to type_name by the gguf
    package (tools/python-env), from its values as gguf dequantizes them: in a child process, so
    that the benchmark's own memory stays small (a process it starts counts the pages it is
    forked with in its peak RSS)."""
    subprocess.run([sys.executable, os.path.abspath(__file__), "quantize", src, dst, type_name],
                   check=True)


def quantize_here(src, dst, type_name):
    """quantize_with_gguf's work, in this process."""
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType, quants
    qtype = GGMLQuantizationType[type_name]
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), field.types[0], sub_type=sub)
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape)]  # outermost first: (n_out, n_in) or (n,)
        data = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if data.ndim == 2:
            w.add_tensor(t.name, quants.quantize(data, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(t.name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__" and sys.argv[1:2] == ["quantize"]:
    quantize_here(*sys.argv[2:5])
