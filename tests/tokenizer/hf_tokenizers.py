"""For the tests that compare with the PyPI `tokenizers` package (Hugging Face's Rust tokenizers),
pinned in tools/requirements-test.txt and installed by tools/python-env, whose python ctest runs
the Python tests with: require_tokenizers() returns when it imports, else exits 77 (skipped)
with a message."""
import sys


def require_tokenizers():
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print("SKIPPED: the PyPI package tokenizers is not installed (tools/python-env installs "
              "it when PyPI is reachable; ctest then runs the Python tests with its python)")
        sys.exit(77)
