"""For the tests that compare with the PyPI `gguf` package (ggml's own Python reader, writer and
NumPy dequantizers), pinned in tools/requirements-test.txt and installed by tools/python-env,
whose python ctest runs the Python tests with: require_gguf() returns when it imports, else
exits 77 (skipped) with a message."""
import sys


def require_gguf():
    try:
        import gguf.quants  # noqa: F401
    except ImportError:
        print("SKIPPED: the PyPI package gguf is not installed (tools/python-env installs it when "
              "PyPI is reachable; ctest then runs the Python tests with its python)")
        sys.exit(77)
