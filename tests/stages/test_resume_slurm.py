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
  resumes the same run directory and completes with the metrics of the uninterrupted run;
- the same job requeued from outside (`scontrol requeue`, as preemption with requeue does): Slurm
  sends SIGTERM, every rank stops with state `interrupted`, the requeued start completes it.
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
from resume_helpers import (metric_diff, metrics, recorded_windows, shared_data, taken,
                            test_env, wait_for_records, write_recipe)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

MODEL, WIKI = shared_data()
if not os.environ.get("SLURM_CONF"):
    print("run me through tests/comm/slurm_env.sh")
    sys.exit(2)

session = EvalSession("eval_resume_slurm_")
tmp = session.tmp
ENV = test_env()
MAXW = int(sys.argv[1]) if len(sys.argv) > 1 else 6000  # windows of the runs that get signalled
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

# 2. sbatch --requeue in the README's form, cut mid-forward, resumed by its requeued start.
JOB = """#!/bin/bash
#SBATCH --ntasks=3 --requeue --open-mode=append --output=NAME.out
RUN=runs/NAME
if [ -f $RUN/invocation ]; then
    srun --mpi=pmix BIN run --resume $RUN
else
    srun --mpi=pmix BIN run resume.yaml --run-dir $RUN
fi
rc=$?
echo "attempt ${SLURM_RESTART_COUNT:-0}: exit $rc"
[ $rc -eq 6 ] && scontrol requeue $SLURM_JOB_ID
exit $rc
"""


def squeue(job_id, fmt="%T %r"):
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", fmt], capture_output=True,
                          text=True, env=ENV, timeout=60).stdout.strip()


class Queued:
    """Stands in for a Popen in wait_for_records: running while squeue lists the job."""

    def __init__(self, job_id):
        self.job_id = job_id

    def poll(self):
        return None if squeue(self.job_id) else 0


def requeued_job(name, cut, signal_number):
    """Submits the job, cuts its first attempt mid-forward with the command `cut` (+ job id),
    and checks that every rank stopped with state `interrupted` by signal_number, that the job
    ran once more and that this second start completed the run directory identically."""
    with open(os.path.join(tmp, name + ".sh"), "w") as f:
        f.write(JOB.replace("NAME", name).replace("BIN", BIN))
    p = subprocess.run(["sbatch", "--parsable", name + ".sh"], capture_output=True, text=True,
                       cwd=tmp, env=ENV, timeout=60)
    check(p.returncode == 0, f"{name}: sbatch", p.stderr)
    job_id = p.stdout.strip().split(";")[0]
    run_dir = os.path.join(tmp, "runs", name)
    pid = wait_for_records(run_dir, 1, 10 * 600, Queued(job_id))
    check(pid is not None, f"{name}: the batch job's rank 1 got into the forward")
    subprocess.run(cut + [job_id], env=ENV, timeout=60)
    states = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(states) < 3:  # the first attempt's end
        states = [json.load(open(f)) for f in glob.glob(os.path.join(run_dir, "state", "*.json"))]
        states = [s for s in states if s["status"] == "interrupted"]
        time.sleep(0.05)
    check(len(states) == 3, f"{name}: every rank of the first attempt interrupted",
          str(states)[:1500])
    first = recorded_windows(run_dir)
    # Slurm holds a requeued job for 120 s (reason BeginTime); the test lets it start sooner,
    # though not within the second of the requeue: slurmd refuses ("Job credential revoked") a
    # credential issued in the same second as the revocation of the first start's.
    deadline, released = time.monotonic() + 400, False
    while time.monotonic() < deadline and squeue(job_id):
        if not released and "BeginTime" in squeue(job_id):
            subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now+2"],
                           env=ENV, timeout=60)
            released = True
        time.sleep(0.2)
    show = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                          env=ENV, timeout=60).stdout
    out_path = os.path.join(tmp, name + ".out")
    log = open(out_path).read() if os.path.exists(out_path) else ""
    print(f"{name}: job {job_id}: {first} of {MAXW} windows recorded by the first attempt")
    print("\n".join(line for line in log.splitlines() if not line.startswith("[r")))
    check("attempt 1: exit 0" in log, f"{name}: the requeued start exits 0", log[-3000:])
    check(log.count(f"interrupted by signal {signal_number} ") == 3,
          f"{name}: each rank says it was interrupted by signal {signal_number}", log[-3000:])
    check("JobState=COMPLETED" in show and "Restarts=1" in show,
          f"{name}: job completed after one requeue", show)
    diff = metric_diff(want4, metrics(run_dir))
    check(not diff, f"{name}: metrics bit-identical to the uninterrupted run", str(diff)[:2000])
    check(taken(run_dir) == [first, MAXW - first], f"{name}: resumed from the records",
          str(taken(run_dir)))
    return log


# the pre-timeout signal, as `--signal=USR1@120` sends it to the job's steps: the job script
# sees exit 6 and requeues itself
log = requeued_job("usr1", ["scancel", "--signal=USR1"], 10)
check("attempt 0: exit 6" in log, "usr1: the first attempt exits 6", log[-3000:])
# preemption with requeue, or an operator's `scontrol requeue`: Slurm sends SIGTERM to the job
# (its batch shell too) and starts it again
requeued_job("requeue", ["scontrol", "requeue"], 15)

session.finish()
