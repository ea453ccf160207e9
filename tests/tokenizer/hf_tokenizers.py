"""The PyPI `tokenizers` package (Hugging Face's Rust tokenizers) as an independent reference:
ensure_tokenizers() makes a venv under the build tree once (with the system site packages, so
NumPy and regex stay visible), pip-installs the pinned version, and re-runs the calling script
with the venv's Python. Offline, or without python3-venv, the test skips with a message."""
import fcntl
import os
import subprocess
import sys

VERSION = "0.23.3"


def _has_tokenizers(python):
    return os.path.exists(python) and subprocess.run(
        [python, "-c", f"import tokenizers; assert tokenizers.__version__ == '{VERSION}'"],
        capture_output=True).returncode == 0


def _skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(77)


def ensure_tokenizers():
    """Returns when `import tokenizers` works; otherwise re-executes this script in the venv."""
    try:
        import tokenizers
        if tokenizers.__version__ == VERSION:
            return
    except ImportError:
        pass
    if os.environ.get("EVALMESH_TOKENIZERS_VENV"):
        _skip("the tokenizers venv does not provide tokenizers")
    build = os.path.abspath(os.environ.get("EVALMESH_BUILD_DIR", "."))
    venv = os.path.join(build, "venv-tokenizers")
    python = os.path.join(venv, "bin", "python3")
    with open(os.path.join(build, "venv-tokenizers.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # tests running in parallel make it once
        if not _has_tokenizers(python):
            made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                                  capture_output=True, text=True)
            if made.returncode != 0:
                _skip(f"cannot make a venv (python3-venv missing?): {made.stderr.strip()[-200:]}")
            pip = subprocess.run([python, "-m", "pip", "install", "-q",
                                  "--disable-pip-version-check", f"tokenizers=={VERSION}"],
                                 capture_output=True, text=True, timeout=600)
            if pip.returncode != 0:
                _skip(f"cannot install tokenizers=={VERSION} from PyPI (offline?): "
                      f"{pip.stderr.strip()[-200:]}")
    os.environ["EVALMESH_TOKENIZERS_VENV"] = venv
    sys.stdout.flush()
    os.execv(python, [python] + sys.argv)
