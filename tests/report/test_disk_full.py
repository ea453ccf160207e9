"""A full disk during a run (issue 13): `evalmesh run` on a small tmpfs (mounted in a private
mount namespace, so nothing outside this test sees it) that fills up mid-run exits 4 with a
message naming the file and "No space left on device"; the rank state file still holds the last
complete state (never 0 bytes), the history file keeps exactly its earlier bytes (an append that
came up short is cut back), no temporary file is left; once space is freed, the next run's history
line is there and `evalmesh history` reads every run.
Needs root (mount) and unshare(1); skipped with a message otherwise."""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_helpers import check, evalmesh, finish, run, skip, tempdir, write

PAGE = 4096  # tmpfs allocates whole pages

if os.environ.get("EM_DISK_FULL_NS") != "1":
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or not unshare:
        skip("needs root and unshare(1) to mount a small tmpfs")
    env = dict(os.environ, EM_DISK_FULL_NS="1")
    p = subprocess.run([unshare, "--mount", "--propagation", "private", sys.executable]
                       + sys.argv, env=env)
    sys.exit(p.returncode)

source = os.environ["EVALMESH_SOURCE_DIR"]
work = tempdir()
mnt = os.path.join(work, "small")
os.mkdir(mnt)
if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt]).returncode != 0:
    skip("mounting a tmpfs is not permitted here")
hist = os.path.join(mnt, "hist.jsonl")
recipe = write(os.path.join(work, "r.yaml"), """name: full
stages:
  model: {kind: model, path: %s}
  text: {kind: dataset, tokenizer: model, path: %s, protocol: chunked, n_ctx: 64}
  ppl: {kind: forward, model: model, data: text}
  metrics: {kind: aggregate, inputs: [ppl]}
  report: {kind: report, metrics: metrics, outputs: [json, {type: history, path: %s}]}
""" % (os.path.join(source, "recipes", "data", "demo-model.gguf"),
       os.path.join(source, "recipes", "data", "demo.txt"), hist))


def evalmesh_run(run_dir):
    return run([evalmesh(), "run", recipe, "--run-dir", run_dir], timeout=120)


def fill(leave_pages):
    """Fills the tmpfs, then frees leave_pages pages."""
    filler = os.path.join(mnt, "filler")
    with open(filler, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\1" * PAGE)
        except OSError:
            pass
    size = os.path.getsize(filler) // PAGE * PAGE
    os.truncate(filler, max(0, size - leave_pages * PAGE))


def temp_files():
    return [p for p in glob.glob(os.path.join(mnt, "**", ".*"), recursive=True)]


# 1. A run with room: results and one history line.
rc, out, err = evalmesh_run(os.path.join(mnt, "run1"))
check(rc == 0, "first run: %d %s" % (rc, err))
# Pad the history with blank lines (allowed) to 100 bytes short of a page boundary: the next
# append then fits only partly, which is the short write a full disk gives.
with open(hist, "ab") as f:
    f.write(b"\n" * (PAGE - os.path.getsize(hist) % PAGE - 100))
with open(hist, "rb") as f:
    before = f.read()

# 2. Three pages left: the resolved recipe, the log and the first rank state fit; the next state
# update, results.json and the history line do not.
# The forward's window records of run 1 show how many pages run 2's take: leave those too (and
# one for the page the last record starts).
records = sum(os.path.getsize(f) for f in glob.glob(os.path.join(mnt, "run1", "records", "*")))
fill(3 + (records + PAGE - 1) // PAGE + 1)
run2 = os.path.join(mnt, "run2")
rc, out, err = evalmesh_run(run2)
check(rc == 4, "full disk: exit %d (want 4): %s" % (rc, err))
# The window records fit (their pages were left free), so results.json is the first write that
# does not, and the history line is cut short.
check("cannot write '%s/results.json': No space left on device" % run2 in err,
      "message names results.json: " + err)
check("cannot append to '%s': No space left on device" % hist in err,
      "message names the history file: " + err)
check(err.count("rank state: cannot write") <= 1, "a state write failure is reported once: " + err)
with open(os.path.join(run2, "state", "rank-0.json")) as f:
    state = json.load(f)  # a whole document, not 0 bytes
check(state["rank"] == 0, "the last complete state: %s" % state)
with open(hist, "rb") as f:
    check(f.read() == before, "the history keeps exactly its earlier bytes")
check(not os.path.exists(os.path.join(run2, "results.json")), "no partial results.json")
check(temp_files() == [], "temporary files left: %s" % temp_files())

# 3. Space again: the next run's line is read, after the earlier one.
os.unlink(os.path.join(mnt, "filler"))
rc, out, err = evalmesh_run(os.path.join(mnt, "run3"))
check(rc == 0, "run after freeing space: %d %s" % (rc, err))
rc, out, err = run([evalmesh(), "history", hist])
rows = [l.split() for l in out.splitlines() if l.strip() and l.split()[0].isdigit()]
check(rc == 0 and len(rows) >= 2 and "skipped" not in err, "history: %d %s %s" % (rc, out, err))
with open(hist) as f:
    lines = [l for l in f.read().split("\n") if l.strip()]
check(len(lines) == 2 and all(json.loads(l)["schema"] == "evalmesh.results/1" for l in lines),
      "two complete history lines: %d" % len(lines))
subprocess.run(["umount", mnt])
sys.exit(finish())
