"""For test scripts that need the PyPI `gguf` package: call reexec_with_gguf() first. It returns
when gguf imports; otherwise it re-runs the script with the venv that gguf_venv.py made (its
path in EVALMESH_GGUF_VENV), or exits 77 (skipped) with a message when that venv has no gguf."""
import os
import sys


def reexec_with_gguf():
    try:
        import gguf.quants  # noqa: F401
        return
    except ImportError:
        pass
    venv = os.environ.get("EVALMESH_GGUF_VENV", "")
    python = os.path.join(venv, "bin", "python") if venv else ""
    if python and os.path.exists(python) and os.path.realpath(sys.prefix) != \
            os.path.realpath(venv):
        os.execv(python, [python] + sys.argv)
    print("SKIPPED: the PyPI package gguf is not installed (the gguf_venv setup test installs "
          "it into %s when PyPI is reachable)" % (venv or "the build tree"))
    sys.exit(77)
