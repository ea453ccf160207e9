"""Window records and `--resume` under Slurm (run by tests/comm/slurm_env.sh, which starts a real
one-node cluster and sets SLURM_CONF; stories260K from ../shared/data, skipped without it):
- `srun --mpi=pmix` with 4 ranks, one SIGKILLed in the middle of the forward. Slurm's PMIx plugin
  sees the rank's connection drop and cancels the whole step with SIGKILL at once (also with
  `-K0`): srun says "task 2: Killed", the other ranks get no chance to say anything (their state
  files still say `running`; `evalmesh check-state` then finds every rank DEAD), but every record
  they wrote is on disk: `--resume` on 2 and on 3 ranks under srun gives metrics bit-identical to
  an uninterrupted 4-rank srun run.
- an sbatch job in the README's preemption-safe form (`--requeue`; the script resumes its run
  directory when it holds an invocation and requeues itself on exit status 6) signalled with
  `scancel --signal=USR1` mid-forward, as `--signal=USR1@120` does before the time limit: every
  rank stops with status 6 and state `interrupted`, the job requeues itself, the second start
  resumes the same run directory and completes with the metrics of the uninterrupted run.
Sleeps only pace the polling; what is checked never depends on timing."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from eval_helpers import BIN, EvalSession
from resume_helpers import (metric_diff, metrics, recorded_windows, taken, test_env,
                            wait_for_records, write_recipe)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "")
MODEL = os.path.join(DATA, "models", "stories260K.gguf")
WIKI = os.path.join(DATA, "text", "wikitext-2-raw-v1.test.txt")
if not (os.path.exists(MODEL) and os.path.exists(WIKI)):
    print(f"SKIPPED: shared data not found under '{DATA}'")
    sys.exit(77)
if not os.environ.get("SLURM_CONF"):
    print("run me through tests/comm/slurm_env.sh")
    sys.exit(2)

session = EvalSession("eval_resume_slurm_")
tmp = session.tmp
ENV = test_env()
MAXW = 6000
shutil.copy(MODEL, os.path.join(tmp, "model.gguf"))
shutil.copy(WIKI, os.path.join(tmp, "text.txt"))
write_recipe(tmp, MAXW)


def srun(np):
    return ["srun", "--mpi=pmix", "-n", str(np), "--export=ALL"]


def run(args, np):
    p = subprocess.run(srun(np) + [BIN, *args], capture_output=True, text=True, timeout=600,
                       cwd=tmp, env=ENV)
    return p.returncode, p.stdout, p.stderr


# 1. Uninterrupted, then one rank SIGKILLed, then resumed on 2 and on 3 ranks.
rc, _, err = run(["run", "resume.yaml", "--run-dir", "whole4"], 4)
check(rc == 0, "uninterrupted 4-rank srun run", err[-2000:])
want4 = metrics(os.path.join(tmp, "whole4"))

killed = os.path.join(tmp, "killed")
job = subprocess.Popen(srun(4) + [BIN, "run", "resume.yaml", "--run-dir", "killed"], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
pid = wait_for_records(killed, 2, 20 * 600, job)
if pid:
    os.kill(pid, signal.SIGKILL)
out, err = job.communicate(timeout=600)
check(pid is not None, "rank 2 killed in the middle of its forward", err[-2000:])
check(job.returncode != 0, "srun failed", f"rc={job.returncode}")
check(re.search(r"srun: error: \S+: task 2: Killed", err) is not None, "srun names task 2",
      err[-2000:])
done = recorded_windows(killed)
print(f"srun, rank 2 killed: exit {job.returncode}, {done} of {MAXW} windows recorded")
print("what srun printed:\n" + "\n".join(line for line in err.splitlines()
                                         if not line.startswith("[r")))
check(0 < done < MAXW, "some but not all windows recorded", str(done))
p = subprocess.run([BIN, "check-state", "killed"], capture_output=True, text=True, cwd=tmp,
                   env=ENV, timeout=60)
check(p.returncode == 5 and re.search(r"\n2 .*DEAD: process \d+ no longer exists", p.stdout),
      "check-state: rank 2 DEAD", p.stdout + p.stderr)
for np in [2, 3]:
    d = os.path.join(tmp, f"resume{np}")
    shutil.copytree(killed, d)
    rc, _, err = run(["run", "--resume", d], np)
    check(rc == 0, f"srun resume on {np} ranks rc", err[-3000:])
    diff = metric_diff(want4, metrics(d))
    check(not diff, f"srun resume on {np} ranks: metrics bit-identical to the 4-rank run",
          str(diff)[:2000])
    t = taken(d)
    print(f"srun resume on {np} ranks: {t[0]} windows taken from records, {t[1]} computed")
    check(t == [done, MAXW - done], f"srun resume on {np} ranks: reused", str(t))

# 2. sbatch --requeue, the pre-timeout signal mid-forward, the job requeues itself and resumes.
JOB = f"""#!/bin/bash
#SBATCH --ntasks=3 --requeue --open-mode=append --output=job.out
RUN=runs/job
if [ -f $RUN/invocation ]; then
    srun --mpi=pmix {BIN} run --resume $RUN
else
    srun --mpi=pmix {BIN} run resume.yaml --run-dir $RUN
fi
rc=$?
echo "attempt ${{SLURM_RESTART_COUNT:-0}}: exit $rc"
[ $rc -eq 6 ] && scontrol requeue $SLURM_JOB_ID
exit $rc
"""
with open(os.path.join(tmp, "job.sh"), "w") as f:
    f.write(JOB)
p = subprocess.run(["sbatch", "--parsable", "job.sh"], capture_output=True, text=True, cwd=tmp,
                   env=ENV, timeout=60)
check(p.returncode == 0, "sbatch", p.stderr)
job_id = p.stdout.strip().split(";")[0]
run_dir = os.path.join(tmp, "runs", "job")


class Squeue:
    """Stands in for a Popen in wait_for_records: running while squeue lists the job."""

    def poll(self):
        q = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True,
                           env=ENV, timeout=60)
        return None if q.stdout.strip() else 0


pid = wait_for_records(run_dir, 1, 10 * 600, Squeue())
check(pid is not None, "the batch job's rank 1 got into the forward")
subprocess.run(["scancel", "--signal=USR1", job_id], env=ENV, timeout=60)
states = []
deadline = time.monotonic() + 300
while time.monotonic() < deadline and len(states) < 3:  # the first attempt's end
    states = [json.load(open(f)) for f in glob.glob(os.path.join(run_dir, "state", "*.json"))]
    states = [s for s in states if s["status"] == "interrupted"]
    time.sleep(0.05)
check(len(states) == 3, "every rank of the first attempt interrupted", str(states)[:1500])
first = recorded_windows(run_dir)
# Slurm holds a requeued job for 120 s (reason BeginTime); the test lets it start at once.
deadline = time.monotonic() + 400
while time.monotonic() < deadline and Squeue().poll() is None:
    q = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %r"], capture_output=True,
                       text=True, env=ENV, timeout=60).stdout
    if "BeginTime" in q:
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], env=ENV,
                       timeout=60)
    time.sleep(0.2)
show = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                      env=ENV, timeout=60).stdout
out_path = os.path.join(tmp, "job.out")
log = open(out_path).read() if os.path.exists(out_path) else ""
print(f"sbatch job {job_id}: {first} of {MAXW} windows recorded by the first attempt")
print(log[-3000:])
check("attempt 0: exit 6" in log and "attempt 1: exit 0" in log,
      "first attempt exit 6, requeued, second exit 0", log[-3000:])
check(log.count("interrupted by signal 10") == 3, "each rank says it was interrupted by SIGUSR1",
      log[-3000:])
check("JobState=COMPLETED" in show and "Restarts=1" in show, "job completed after one requeue",
      show)
diff = metric_diff(want4, metrics(run_dir))
check(not diff, "requeued job: metrics bit-identical to the uninterrupted run", str(diff)[:2000])
check(taken(run_dir) == [first, MAXW - first], "requeued job: resumed from the records",
      str(taken(run_dir)))

session.finish()
