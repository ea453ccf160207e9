"""Helpers shared by the end-to-end evaluation scripts (test_e2e.py, test_inputs.py; they count
their checks with tests/support/checks.py): a runner of the evalmesh binary (optionally under
mpirun) that gives each run a fresh run directory in one temporary folder and reads back its
results.json."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import finish  # noqa: E402

BIN = os.environ["EVALMESH_BIN"]
MPIRUN = os.environ.get("EVALMESH_MPIRUN", "")


def shared_files(*relative):
    """The paths of files under ../shared/data (EVALMESH_SHARED_DATA); exits 77 (ctest's skip)
    when one is missing."""
    data = os.environ.get("EVALMESH_SHARED_DATA", "")
    paths = tuple(os.path.join(data, r) for r in relative)
    if not all(os.path.exists(p) for p in paths):
        print(f"SKIPPED: shared data not found under '{data}'")
        sys.exit(77)
    return paths


def stories_data():
    """(stories260K.gguf, the TinyStories sample)."""
    return shared_files("models/stories260K.gguf", "text/tinystories_sample.txt")


class EvalSession:
    """One test script's state: its temporary folder and its run count."""

    def __init__(self, prefix):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.runs = 0

    def evalmesh(self, args, np=None):
        """Runs evalmesh (under mpirun -np when np is given) with a fresh run directory; returns
        (exit status, stdout, stderr, results.json or None)."""
        self.runs += 1
        run_dir = os.path.join(self.tmp, f"run{self.runs}")
        cmd = [BIN, *args, "--run-dir", run_dir]
        env = dict(os.environ)
        if np is not None:
            cmd = [MPIRUN, "-np", str(np), "--allow-run-as-root", "--oversubscribe", *cmd]
            # LeakSanitizer's exit-time tracer sometimes crashes (signal 11) in oversubscribed
            # OpenMPI jobs after the run finished; leaks are checked by the single-process runs.
            if "ASAN_OPTIONS" in env:
                env["ASAN_OPTIONS"] += ":detect_leaks=0"
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        results = None
        path = os.path.join(run_dir, "results.json")
        if os.path.exists(path):
            with open(path) as f:
                results = json.load(f)
        return p.returncode, p.stdout, p.stderr, results

    def write(self, name, data, mode="w"):
        """Writes data to a file named name in the temporary folder; returns its path."""
        path = os.path.join(self.tmp, name)
        with open(path, mode) as f:
            f.write(data)
        return path

    def finish(self):
        """Removes the temporary folder, prints the failure count and exits 1 if any failed."""
        shutil.rmtree(self.tmp, ignore_errors=True)
        sys.exit(finish())
