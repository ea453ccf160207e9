"""Test setup: a virtual environment under the build tree with the PyPI `gguf` package (and the
system's NumPy), for the tests that compare evalmesh's tensor types with gguf's dequantizers.
Usage: gguf_venv.py VENV_DIR. Always exits 0: when PyPI cannot be reached the venv is left
without gguf, and the tests that need it skip with a message (gguf_python says why)."""
import os
import subprocess
import sys

REQUIREMENT = "gguf>=0.17,<1"


def has_gguf(python):
    return subprocess.run([python, "-c", "import gguf.quants"], capture_output=True).returncode == 0


def main():
    venv = sys.argv[1]
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python) and has_gguf(python):
        print("gguf already installed in %s" % venv)
        return
    p = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("could not create a venv at %s: %s" % (venv, p.stderr.strip()))
        return
    p = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--timeout", "20", "--retries", "1", REQUIREMENT],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("pip install %s failed (is PyPI reachable?): %s" % (REQUIREMENT, p.stderr.strip()))
        return
    print("installed %s in %s" % (REQUIREMENT, venv))


if __name__ == "__main__":
    main()
