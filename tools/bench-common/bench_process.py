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


def make_110m(mkmodel, path, weight_type):
    """Writes the 110M benchmark model (random weights) with the Llama 2 vocabulary; False when
    the shared data lacks the vocabulary."""
    if not os.path.exists(LLAMA_SPM):
        return False
    subprocess.run([mkmodel, "--out", path, *SIZE_110M, "--type", weight_type, "--tokenizer",
                    LLAMA_SPM], check=True, stdout=subprocess.DEVNULL)
    return True
