"""Hostile files and options (issue 13), each with real files and real processes: FIFOs and
devices as datasets and includes are refused before any read (run under a timeout: a hang fails
the test instead of blocking it), an include chain that fans out stops with the chain named,
numeric options out of range are refused with the range, a tiny push timeout still times out, a
forged push spool sends nothing to the URL or credential it names (a loopback listener proves
it), a token in a URL is redacted from the log, spool and recipe.resolved.yaml, a run directory
given through a symbolic link is refused, check-state calls a rank whose process is gone DEAD, and
--force clears the previous run's rank state files.
usage: test_hostile_inputs.py REPORT_DRIVER"""
import glob
import json
import os
import socket
import stat
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_helpers import Webhook, check, driver, evalmesh, finish, free_port, report_recipe, \
    run, tempdir, write

source = os.environ["EVALMESH_SOURCE_DIR"]
MODEL = os.path.join(source, "recipes", "data", "demo-model.gguf")
TEXT = os.path.join(source, "recipes", "data", "demo.txt")
work = tempdir()
HANG_GUARD = 60  # seconds: only so that a regression fails instead of hanging ctest


def run_recipe(text, *extra, name="r.yaml"):
    path = write(os.path.join(work, name), text)
    return run([evalmesh(), "run", path] + list(extra), timeout=HANG_GUARD)


def pipeline(dataset=TEXT, report="[json]", model=MODEL):
    return """name: hostile
stages:
  model: {kind: model, path: %s}
  text: {kind: dataset, tokenizer: model, path: %s, protocol: chunked, n_ctx: 64}
  ppl: {kind: forward, model: model, data: text}
  metrics: {kind: aggregate, inputs: [ppl]}
  report: {kind: report, metrics: metrics, outputs: %s}
""" % (model, dataset, report)


def validate(path):
    return run([evalmesh(), "validate", path], timeout=HANG_GUARD)


# 1. FIFO and /dev/zero as the dataset (and a FIFO as the model): exit 2 at init, naming the path, before anything runs.
fifo = os.path.join(work, "data.fifo")
os.mkfifo(fifo)
rc, out, err = run_recipe(pipeline(dataset=fifo), "--run-dir", os.path.join(work, "fifo-run"))
check(rc == 2 and "r.yaml:4:49: stage 'text': path %s: not a regular file (a FIFO)" % fifo in err,
      "FIFO dataset: %d %s" % (rc, err))
rc, out, err = run_recipe(pipeline(dataset="/dev/zero"), "--run-dir", os.path.join(work, "zero"))
check(rc == 2 and "stage 'text': path /dev/zero: not a regular file (a character device)" in err,
      "/dev/zero dataset: %d %s" % (rc, err))
# A dataset over the 1 GiB limit for text read whole (a sparse file: nothing is read).
sparse = os.path.join(work, "huge.txt")
with open(sparse, "wb") as f:
    f.truncate((1 << 30) + 1)
rc, out, err = run_recipe(pipeline(dataset=sparse), "--run-dir", os.path.join(work, "huge"))
check(rc == 2 and "cannot read '%s': it is 1073741825 bytes, more than the limit of 1073741824 "
      "bytes for a dataset" % sparse in err, "huge dataset: %d %s" % (rc, err))
os.unlink(sparse)

# ... and as the model.
rc, out, err = run_recipe(pipeline(model=fifo), "--run-dir", os.path.join(work, "fifo-model"))
check(rc == 2 and "r.yaml:3:30: stage 'model': path %s: not a regular file (a FIFO)" % fifo in err,
      "FIFO model: %d %s" % (rc, err))

# 2. FIFO and /dev/zero as includes, and as the recipe itself.
for target, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device")):
    r = write(os.path.join(work, "inc.yaml"), "include: %s\nname: x\nstages: {}\n" % target)
    rc, out, err = validate(r)
    check(rc == 2 and "%s:1:10: cannot read included file '%s': it is %s, not a regular file"
          % (r, target, kind) in err, "include %s: %d %s" % (target, rc, err))
rc, out, err = validate(fifo)
check(rc == 2 and "it is a FIFO, not a regular file (a recipe must be one)" in err,
      "FIFO recipe: %d %s" % (rc, err))

# 3. An include chain that fans out: each of 25 files includes the next one twice (2^25 loads).
levels = 25
for i in range(levels):
    body = "include: [f%d.yaml, f%d.yaml]\n" % (i + 1, i + 1) if i + 1 < levels else ""
    write(os.path.join(work, "fan", "f%d.yaml" % i), body + "k%d: 1\n" % i)
top = os.path.join(work, "fan", "f0.yaml")
rc, out, err = validate(top)
check(rc == 2 and "includes load more than 64 files or 4194304 bytes in all" in err,
      "fan-out: %d %s" % (rc, err))
check("f0.yaml -> " in err and "f1.yaml -> " in err, "fan-out message names the chain: " + err)

# 4. A big recipe is refused by size (1 MiB), not read to the end.
big = write(os.path.join(work, "big.yaml"), "name: big\n" + "#" * (1 << 20) + "\n")
rc, out, err = validate(big)
check(rc == 2 and "it is %d bytes, more than the limit of 1048576 bytes for a recipe"
      % os.path.getsize(big) in err, "big recipe: %d %s" % (rc, err))

# 5. Numeric options out of range: refused with the range before conversion.
r = write(os.path.join(work, "t.yaml"), pipeline() + "init_timeout_s: 3e9\n")
rc, out, err = validate(r)
check(rc == 2 and "init_timeout_s" in err and "must be at most 604800, got 3e9" in err,
      "huge init timeout: %d %s" % (rc, err))
r = write(os.path.join(work, "t.yaml"), pipeline() + "collective_timeout_s: 1e300\n")
rc, out, err = validate(r)
check(rc == 2 and "must be at most 604800" in err, "huge collective timeout: %d %s" % (rc, err))


r = report_recipe(work, "tiny", "      - {type: webhook, url: 'http://127.0.0.1:9/h', timeout_s: 1e-7}\n")
rc, out, err = run([driver(), r, os.path.join(work, "tiny-run")], timeout=HANG_GUARD)
check(rc == 2 and "must be at least 0.001, got 1e-7" in err, "tiny push timeout: %d %s" % (rc, err))


# A listener that accepts connections and never answers: a push with timeout_s 0.001 (one
# millisecond, the least allowed) must time out, not wait forever (0 would be libcurl's "no limit").
# On a loaded machine the millisecond can run out while resolving or connecting: whatever the
# phase, the push says "timed out after 0.001 s".
class Silent:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return


silent = Silent()
r = report_recipe(work, "ms", "      - {type: webhook, url: 'http://127.0.0.1:%d/h', timeout_s: 0.001, "
                  "retries: 0, required: true}\n" % silent.port)
rc, out, err = run([driver(), r, os.path.join(work, "ms-run")], timeout=HANG_GUARD)
check(rc == 4 and "webhook push to http://127.0.0.1:%d/h failed after 1 attempt" % silent.port in err
      and "timed out after 0.001 s (" in err,
      "1 ms push timeout times out: %d %s" % (rc, err))

# 6. A forged spool file: the URL and the credential variable it names are not used; the push
# goes (and fails) where the run's recipe says, and the thief's listener receives nothing.
thief = Webhook()
dead_port = free_port()
run_dir = os.path.join(work, "forged")
r = report_recipe(work, "forged", "      - json\n      - {type: webhook, url: 'http://127.0.0.1:%d/h', "
                  "retries: 0, backoff_s: 0}\n" % dead_port)
rc, out, err = run([driver(), r, run_dir], timeout=HANG_GUARD)
check(rc == 0 and "spooled in" in err, "push to a closed port is spooled: %d %s" % (rc, err))
spooled = glob.glob(os.path.join(run_dir, "push-spool", "*.json"))
check(len(spooled) == 1, "one spool file: %s" % spooled)
with open(spooled[0]) as f:
    spool = json.load(f)
spool.update({"url": thief.url, "method": "POST", "content_type": "application/json",
              "auth": {"type": "bearer", "env": "AWS_SECRET_ACCESS_KEY", "file": None}})
with open(spooled[0], "w") as f:
    json.dump(spool, f)
env = {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-not-for-you"}
rc, out, err = run([evalmesh(), "push", run_dir], env, timeout=HANG_GUARD)
check(rc == 4 and "webhook push to http://127.0.0.1:%d/h failed" % dead_port in err,
      "the forged spool goes to the recipe's URL: %d %s %s" % (rc, out, err))
check(thief.requests == [], "nothing sent to the forged URL: %s" % thief.requests)
# A spool file others may write, or one that belongs to another user, is refused outright.
os.chmod(spooled[0], 0o666)
rc, out, err = run([evalmesh(), "push", run_dir], env, timeout=HANG_GUARD)
check(rc == 2 and "refusing '%s': others may write it (mode 0666)" % spooled[0] in err,
      "world-writable spool: %d %s" % (rc, err))
os.chmod(spooled[0], 0o600)
if os.geteuid() == 0:
    os.chown(spooled[0], 65534, 65534)
    rc, out, err = run([evalmesh(), "push", run_dir], env, timeout=HANG_GUARD)
    check(rc == 2 and "refusing '%s': it belongs to uid 65534, not to this user" % spooled[0] in err,
          "someone else's spool: %d %s" % (rc, err))
    os.chown(spooled[0], 0, 0)
# A forged recipe.resolved.yaml writable by others is refused too.
resolved = os.path.join(run_dir, "recipe.resolved.yaml")
os.chmod(resolved, 0o666)
rc, out, err = run([evalmesh(), "push", run_dir], env, timeout=HANG_GUARD)
check(rc == 2 and "refusing '%s': others may write it" % resolved in err,
      "world-writable recipe: %d %s" % (rc, err))
check(thief.requests == [], "still nothing sent to the forged URL")
thief.close()

# 7. A token in a URL's query: redacted in the log, the spool, recipe.resolved.yaml and stderr.
SECRET = "s3cr3t-Tok3n-42"
run_dir = os.path.join(work, "token")
r = report_recipe(work, "token", "      - {type: webhook, url: 'http://127.0.0.1:%d/h?x=1&access_token=%s"
                  "&X-Amz-Signature=%s', retries: 0}\n" % (dead_port, SECRET, SECRET))
rc, out, err = run([driver(), r, run_dir], timeout=HANG_GUARD)
check(rc == 0 and "access_token=REDACTED&X-Amz-Signature=REDACTED" in err and "?x=1&" in err,
      "redacted in the messages: %d %s" % (rc, err))
files = [p for p in glob.glob(os.path.join(run_dir, "**"), recursive=True) if os.path.isfile(p)]
check(any(p.endswith("recipe.resolved.yaml") for p in files) and
      any("push-spool" in p for p in files) and any(p.endswith("evalmesh.log") for p in files),
      "log, spool and resolved recipe written: %s" % files)
for p in files:
    with open(p, errors="replace") as f:
        check(SECRET not in f.read(), "the token is in %s" % p)
check(SECRET not in out + err, "the token is on the terminal")
with open(os.path.join(run_dir, "recipe.resolved.yaml")) as f:
    check("access_token=REDACTED" in f.read(), "the resolved recipe shows where it was redacted")
rc, out, err = run([evalmesh(), "push", run_dir], timeout=HANG_GUARD)
check(rc == 2 and "its URL held a secret, which was redacted from recipe.resolved.yaml" in err
      and SECRET not in out + err, "resending a redacted URL is refused: %d %s" % (rc, err))

# 8. The run directory: 0750, and never used through a symbolic link.
real = os.path.join(work, "real-dir")
os.mkdir(real)
link = os.path.join(work, "link-dir")
os.symlink(real, link)
rc, out, err = run_recipe(pipeline(), "--run-dir", link)
check(rc == 2 and "run directory '%s' is a symbolic link" % link in err,
      "run dir through a link: %d %s" % (rc, err))
check(os.listdir(real) == [], "nothing written through the link: %s" % os.listdir(real))
good = os.path.join(work, "good-run")
rc, out, err = run_recipe(pipeline(), "--run-dir", good)
check(rc == 0, "a plain run: %d %s" % (rc, err))
check(stat.S_IMODE(os.stat(good).st_mode) == 0o750, "run dir mode %o" % os.stat(good).st_mode)
check(stat.S_IMODE(os.stat(os.path.join(good, "state")).st_mode) == 0o750, "state dir mode")
with open(os.path.join(good, "state", "rank-0.json")) as f:
    st = json.load(f)
check(st["host"] == socket.gethostname() and st["status"] == "done" and st["pid"] > 0,
      "rank state records host and pid: %s" % st)

# 9. check-state: a rank "running" under a pid that is gone on this host is DEAD, at once.
gone = subprocess.Popen(["true"])
gone.wait()
st.update({"status": "running", "pid": gone.pid, "stage": "ppl"})
with open(os.path.join(good, "state", "rank-0.json"), "w") as f:
    json.dump(st, f)
rc, out, err = run([evalmesh(), "check-state", good, "--silent-after", "100000"])
check(rc == 5 and "DEAD: process %d no longer exists on %s" % (gone.pid, st["host"]) in out
      and out.splitlines()[-1] == "1 ranks: 0 silent, 0 behind, 0 failed, 1 dead",
      "dead pid: %d %s %s" % (rc, out, err))
st.update({"pid": os.getpid()})  # this process is alive: the rank is fine
with open(os.path.join(good, "state", "rank-0.json"), "w") as f:
    json.dump(st, f)
rc, out, err = run([evalmesh(), "check-state", good, "--silent-after", "100000"])
check(rc == 0 and "DEAD" not in out, "live pid: %d %s" % (rc, out))

# 10. --force clears the previous run's rank state files (a 2-rank run left rank-1.json).
write(os.path.join(good, "state", "rank-1.json"), json.dumps(dict(st, rank=1)))
rc, out, err = run_recipe(pipeline(), "--run-dir", good, "--force")
check(rc == 0, "forced run: %d %s" % (rc, err))
check(sorted(os.listdir(os.path.join(good, "state"))) == ["rank-0.json"],
      "old state files cleared: %s" % os.listdir(os.path.join(good, "state")))
with open(os.path.join(good, "state", "rank-0.json")) as f:
    check(json.load(f)["status"] == "done", "rank 0's state is this run's")
sys.exit(finish())
