"""Stress of window records and `--resume` (stories260K from ../shared/data; skipped without it):
ROUNDS times, a run of many small windows on RANKS ranks oversubscribed under mpirun on this
machine is cut at a random point (SIGKILL to one random rank, or SIGTERM to every rank as Slurm
does), sometimes resumed on a random world size and cut again, then resumed on
another random world size to the end: the metrics must always be bit-identical to an
uninterrupted run, and no job may hang (each is bounded by this test's own limit, after which its
whole process group is killed and the round fails).
Usage: test_resume_stress.py [ROUNDS [RANKS]] (default 5 rounds of 16 ranks). The seed is
printed; EVALMESH_STRESS_SEED replays one. Sleeps only pace the polling; what is checked never
depends on timing (where the cuts fall does, which is the point)."""
import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from eval_helpers import BIN, MPIRUN, EvalSession
from resume_helpers import shared_data, metric_diff, metrics, test_env, write_recipe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

MODEL, WIKI = shared_data()
if not MPIRUN:
    print("SKIPPED: mpirun not found")
    sys.exit(77)

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
RANKS = int(sys.argv[2]) if len(sys.argv) > 2 else 16
MAXW = 3000
JOB_LIMIT_S = 240  # a job still running after this long has hung
seed = int(os.environ.get("EVALMESH_STRESS_SEED") or random.SystemRandom().randrange(1 << 32))
print(f"seed {seed} (EVALMESH_STRESS_SEED={seed} replays it), {ROUNDS} rounds, {RANKS} ranks")
rng = random.Random(seed)

session = EvalSession("eval_resume_stress_")
tmp = session.tmp
ENV = test_env()
shutil.copy(MODEL, os.path.join(tmp, "model.gguf"))
shutil.copy(WIKI, os.path.join(tmp, "text.txt"))
write_recipe(tmp, MAXW)


def command(np, args):
    launcher = [MPIRUN, "-np", str(np), "--allow-run-as-root", "--oversubscribe"] if np > 1 else []
    return launcher + [BIN, *args]


def record_bytes(run_dir):
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(run_dir, "records", "*.bin")))


def rank_pids(job):
    """The evalmesh processes of a job: mpirun's children, or the job itself without mpirun."""
    if job.args[0] == BIN:
        return [job.pid]
    pids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == job.pid:
            pids.append(int(stat.split("/")[2]))
    return pids


def finish(job, what):
    """Waits for the job within the limit; on a hang kills its process group and fails."""
    try:
        out, err = job.communicate(timeout=JOB_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        out, err = job.communicate()
        check(False, f"{what}: hung (still running after {JOB_LIMIT_S} s)", err[-3000:])
        return None, err
    return job.returncode, err


def cut(run_dir, np, args, target, how, what):
    """Starts the job, waits until the run directory's records hold `target` bytes, cuts the job
    `how`, and waits for it to end. Returns its exit status."""
    job = subprocess.Popen(command(np, args), cwd=tmp, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True)
    deadline = time.monotonic() + JOB_LIMIT_S
    while job.poll() is None and time.monotonic() < deadline and record_bytes(run_dir) < target:
        time.sleep(0.01)
    pids = rank_pids(job) if job.poll() is None else []
    if how == "sigkill-one-rank" and pids:
        os.kill(rng.choice(pids), signal.SIGKILL)
    elif how == "sigterm-every-rank":
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
    rc, err = finish(job, what)
    print(f"  {what}: {how} at {target} record bytes ({len(pids)} ranks seen), exit {rc}, "
          f"{record_bytes(run_dir)} record bytes now")
    if rc is not None and rc not in EXIT[how] and not (rc == 0 and not pids):
        check(False, f"{what}: {how}: exit status {rc}, expected one of {EXIT[how]}",
              err[-3000:])
    return rc


# the uninterrupted run, and how many record bytes a whole run writes
p = subprocess.run(command(RANKS, ["run", "resume.yaml", "--run-dir", "whole"]), cwd=tmp,
                   capture_output=True, text=True, env=ENV, timeout=JOB_LIMIT_S)
check(p.returncode == 0, f"uninterrupted {RANKS}-rank run", p.stderr[-3000:])
want = metrics(os.path.join(tmp, "whole"))
whole_bytes = record_bytes(os.path.join(tmp, "whole"))
print(f"uninterrupted run on {RANKS} ranks: {whole_bytes} record bytes for {MAXW} windows")

# (SIGTERM to mpirun itself is not among the cuts: OpenMPI 4.1's mpirun then sometimes kills its
# ranks and sometimes lets them run to the end, and exits 1 either way.)
HOW = ["sigkill-one-rank", "sigterm-every-rank"]
# The job's exit status after each cut: mpirun reports the killed rank's signal (137; -9 without
# mpirun); ranks stopped by SIGTERM exit 6. 0 when the cut came after the job's end.
EXIT = {"sigkill-one-rank": (137, -9, 0), "sigterm-every-rank": (6, 0)}
for r in range(ROUNDS):
    d = os.path.join(tmp, f"round{r}")
    print(f"round {r}:")
    args = ["run", "resume.yaml", "--run-dir", d]
    np = RANKS
    for attempt in range(1 + rng.randrange(2)):  # one or two cut attempts
        have = record_bytes(d) if os.path.isdir(d) else 0
        target = have + int(rng.uniform(0.05, 0.7) * max(whole_bytes - have, 1))
        how = rng.choice(HOW)
        rc = cut(d, np, args, target, how, f"attempt {attempt} on {np} ranks")
        if rc is None or os.path.exists(os.path.join(d, "results.json")):
            break  # hung, or the cut came after the end
        args = ["run", "--resume", d]
        np = rng.randint(1, RANKS)
    if os.path.exists(os.path.join(d, "results.json")):  # the cut came after the end
        got = metrics(d)
    else:
        p = subprocess.Popen(command(np, args), cwd=tmp, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True)
        rc, err = finish(p, f"round {r}: final resume on {np} ranks")
        print(f"  final resume on {np} ranks: exit {rc}")
        check(rc == 0, f"round {r}: final resume on {np} ranks exit 0", f"rc={rc} {err[-3000:]}")
        got = metrics(d)
    diff = metric_diff(want, got)
    check(not diff, f"round {r} (seed {seed}): metrics bit-identical to the uninterrupted run",
          str(diff)[:2000])

session.finish()
