"""The committed expected values are what their reference scripts write today:
mt19937_expected.json from mt19937_reference.py (NumPy, CPython), bigbench_expected.json from
bigbench_reference.py over the bigbench 1.0.0 sdist (tools/fetch-bigbench; this part is skipped
when it cannot be fetched). Needs NumPy (tools/python-env)."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
source = os.environ.get("EVALMESH_SOURCE_DIR", os.path.join(here, "..", ".."))
try:
    import numpy  # noqa: F401
except ImportError:
    print("SKIPPED: NumPy is missing (run tools/python-env)")
    sys.exit(77)


def same(script, expected, *args):
    out = subprocess.run([sys.executable, os.path.join(here, script), *args],
                         capture_output=True, check=True).stdout
    with open(os.path.join(here, expected), "rb") as f:
        committed = f.read()
    if out != committed:
        print(f"FAILED: {expected} differs from what {script} writes now")
        sys.exit(1)
    print(f"{expected}: {len(out)} bytes, as {script} writes them")


same("mt19937_reference.py", "mt19937_expected.json")
fetch = subprocess.run([os.path.join(source, "tools", "fetch-bigbench")], capture_output=True,
                       text=True)
if fetch.returncode == 77:
    print("SKIPPED (bigbench part): tools/fetch-bigbench could not fetch the sdist: "
          + fetch.stderr.strip())
    sys.exit(77)
if fetch.returncode != 0:
    print("FAILED: tools/fetch-bigbench: " + fetch.stderr.strip())
    sys.exit(1)
same("bigbench_reference.py", "bigbench_expected.json", fetch.stdout.strip())
