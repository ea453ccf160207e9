"""Window records and `--resume` with real processes and real signals (stories260K from
../shared/data; skipped without it):
- under mpirun with 4 ranks, SIGKILL one rank once its records file shows progress in the middle
  of the forward; its records survive; mpirun stops the others with SIGTERM and they name the
  dead rank (pid and host; message and state `failed`); `evalmesh run --resume` on 2 and on 3
  ranks then gives metrics bit-identical to an uninterrupted 4-rank run, taking the recorded
  windows, and leaves only its own ranks' state files (check-state: all fine);
- a records file cut in the middle of a record, and one with a flipped byte: the damaged record
  is reported and recomputed, every other record used, the metrics identical;
- `evalmesh perplexity --resume` finishes a perplexity run the same way;
- a resume refuses (exit 2, naming what changed) when the recipe, the model or the dataset
  changed;
- SIGTERM to every rank of a 4-rank job mid-forward, and SIGUSR1 to a 2-rank one: exit 6, every
  state `interrupted`, records flushed, and the resume bit-identical;
- a second SIGINT exits at once with status 130;
- heartbeats from the forward's layer loop (EVALMESH_HEARTBEAT_S=0: one per layer and window);
- a rank stopped with SIGSTOP mid-forward: the survivors time out in the next collective, name
  rank 2 (message and state `failed`), and MPI_Abort ends the job with status 5;
- --collective-timeout reaches the recipe's collective_timeout_s (0 refused).
Sleeps only pace the polling; what is checked never depends on timing."""
import glob
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

import resume_helpers
from eval_helpers import BIN, MPIRUN, EvalSession
from resume_helpers import shared_data, HEADER, metrics, records, taken, test_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

MODEL, WIKI = shared_data()

session = EvalSession("eval_resume_")
tmp = session.tmp
ENV = test_env()


def mpi(np):
    return [MPIRUN, "-np", str(np), "--allow-run-as-root", "--oversubscribe"] if np > 1 else []


def run(args, np=1, cwd=tmp, env=None):
    p = subprocess.run(mpi(np) + [BIN, *args], capture_output=True, text=True, timeout=600,
                       cwd=cwd, env={**ENV, **(env or {})})
    return p.returncode, p.stdout, p.stderr


shutil.copy(MODEL, os.path.join(tmp, "model.gguf"))
shutil.copy(WIKI, os.path.join(tmp, "text.txt"))


def write_recipe(maxw):
    resume_helpers.write_recipe(tmp, maxw)


# 1. Damage: one rank, a records file cut in a record and one with a flipped byte.
write_recipe(200)
rc, _, err = run(["run", "resume.yaml", "--run-dir", "whole1"])
check(rc == 0, "single-rank run", err[-2000:])
want1 = metrics(os.path.join(tmp, "whole1"))
files = glob.glob(os.path.join(tmp, "whole1", "records", "f.rank0.*.bin"))
check(len(files) == 1, "one records file", str(files))
recs = records(files[0]) if files else []
check(sorted(w for _, w in recs) == list(range(200)), "200 records, one per window",
      str(len(recs)))
for name, damage, lost in [("cut", "truncate", 200 - 120), ("flip", "flip", 1)]:
    d = os.path.join(tmp, name)
    shutil.copytree(os.path.join(tmp, "whole1"), d)
    os.remove(os.path.join(d, "results.json"))
    path = glob.glob(os.path.join(d, "records", "*.bin"))[0]
    if damage == "truncate":  # in the middle of record 120
        os.truncate(path, recs[120][0] + 40)
    else:  # a byte of record 57's NLLs
        data = bytearray(open(path, "rb").read())
        data[recs[58][0] - 5] ^= 0x10
        open(path, "wb").write(bytes(data))
    rc, _, err = run(["run", "--resume", d])
    check(rc == 0, f"{name}: resume rc", err[-2000:])
    check("torn or damaged" in err, f"{name}: damage reported", err[-2000:])
    check(metrics(d) == want1, f"{name}: metrics identical to the whole run")
    check(taken(d) == [200 - lost, lost], f"{name}: windows taken/computed", str(taken(d)))

# perplexity --resume: the same for the llama-perplexity command line
ppl_args = ["perplexity", "-m", "model.gguf", "-f", "text.txt", "-c", "32", "--chunks", "100"]
rc, out1, err = run(ppl_args + ["--run-dir", "ppl"])
check(rc == 0, "perplexity run", err[-2000:])
d = os.path.join(tmp, "ppl-resumed")
shutil.copytree(os.path.join(tmp, "ppl"), d)
os.remove(os.path.join(d, "results.json"))
path = glob.glob(os.path.join(d, "records", "*.bin"))[0]
os.truncate(path, records(path)[40][0])  # 40 whole records left
rc, out2, err = run(["perplexity", "--resume", d])
estimate = re.compile(r"Final estimate: PPL = [0-9.]+ \+/- [0-9.]+")
check(rc == 0 and metrics(d) == metrics(os.path.join(tmp, "ppl")), "perplexity --resume identical",
      err[-2000:])
check(estimate.search(out1) and estimate.search(out1).group(0) == estimate.search(out2).group(0),
      "perplexity --resume prints the same estimate", out2[-500:])
check(taken(d) == [40, 60], "perplexity --resume: 40 taken, 60 computed", str(taken(d)))

# Heartbeats from the forward's layer loop: with EVALMESH_HEARTBEAT_S=0 each layer of each
# computed window rewrites the state file (stories260K has 5 layers), none for a recorded window.
write_recipe(20)
rc, _, err = run(["run", "resume.yaml", "--run-dir", "beats"], env={"EVALMESH_HEARTBEAT_S": "0"})
state = json.load(open(os.path.join(tmp, "beats", "state", "rank-0.json")))
check(rc == 0 and state["beats"] == 5 * 20, "20 windows of 5 layers: 100 heartbeats",
      f"rc={rc} {state} {err[-1000:]}")
path = glob.glob(os.path.join(tmp, "beats", "records", "*.bin"))[0]
os.truncate(path, records(path)[12][0])  # 12 whole records left
os.remove(os.path.join(tmp, "beats", "results.json"))
rc, _, err = run(["run", "--resume", "beats"], env={"EVALMESH_HEARTBEAT_S": "0"})
state = json.load(open(os.path.join(tmp, "beats", "state", "rank-0.json")))
check(rc == 0 and state["beats"] == 5 * 8, "resume: 8 windows computed, 40 heartbeats",
      f"rc={rc} {state} {err[-1000:]}")
rc, _, err = run(["run", "resume.yaml", "--run-dir", "beats-bad"],
                 env={"EVALMESH_HEARTBEAT_S": "-1"})
check(rc == 2 and "EVALMESH_HEARTBEAT_S '-1' is not a number of seconds from 0 to 86400" in err,
      "EVALMESH_HEARTBEAT_S -1 refused", f"rc={rc} {err[-1000:]}")
write_recipe(200)

# 2. Refusals: changed recipe, model, dataset.
for what, change, words in [
    ("recipe", lambda: write_recipe(199), "the recipe changed"),
    ("model", None, "the model changed"),
    ("dataset", None, "the dataset file changed"),
]:
    d = os.path.join(tmp, "refuse-" + what)
    shutil.copytree(os.path.join(tmp, "whole1"), d)
    os.remove(os.path.join(d, "results.json"))
    saved = {}
    if what == "recipe":
        change()
    else:
        f = os.path.join(tmp, "model.gguf" if what == "model" else "text.txt")
        saved[f] = open(f, "rb").read()
        data = bytearray(saved[f])
        if what == "model":  # a letter of general.name's value in the GGUF header
            i = data.find(b"general.name") + len("general.name") + 4 + 8
            data[i] ^= 0x20
        else:
            data += b"\nOne more line.\n"
        open(f, "wb").write(bytes(data))
    rc, _, err = run(["run", "--resume", d])
    check(rc == 2, f"refuse {what}: exit 2", f"rc={rc} {err[-1500:]}")
    check("resume refused: " + words in err, f"refuse {what}: message", err[-1500:])
    check(not os.path.exists(os.path.join(d, "results.json")), f"refuse {what}: no results")
    for f, data in saved.items():
        open(f, "wb").write(data)
    write_recipe(200)

# A second SIGINT exits at once with 130. The run is held in a push to a server that accepts the
# connection and never answers (timeout_s 600), where nothing looks at the stop flag: the first
# SIGINT is acknowledged on stderr, the second ends the process.
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
with open(os.path.join(tmp, "push.yaml"), "w") as f:
    f.write(resume_helpers.RECIPE.replace("MAXW", "10").replace(
        "outputs: [json]",
        "outputs: [json, {type: pushgateway, url: 'http://127.0.0.1:%d', job: hold, "
        "timeout_s: 600, retries: 0}]" % listener.getsockname()[1]))
job = subprocess.Popen([BIN, "run", "push.yaml", "--run-dir", "sigint"], cwd=tmp, env=ENV,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
listener.settimeout(120)
try:
    conn, _ = listener.accept()  # the push is waiting for an answer
except socket.timeout:
    conn = None
check(conn is not None, "the run got to its push")
job.send_signal(signal.SIGINT)
seen, ack = "", "evalmesh: interrupt: stopping after the current window (interrupt again to exit"
deadline = time.monotonic() + 120
while ack not in seen and time.monotonic() < deadline and job.poll() is None:
    if select.select([job.stderr], [], [], 1)[0]:  # unbuffered reads: select sees all
        seen += os.read(job.stderr.fileno(), 65536).decode(errors="replace")
check(ack in seen, "the first SIGINT is acknowledged", seen[-2000:])
job.send_signal(signal.SIGINT)
try:
    rest = job.communicate(timeout=120)[1].decode(errors="replace")
except subprocess.TimeoutExpired:
    job.kill()
    rest = job.communicate()[1].decode(errors="replace")
check(job.returncode == 130 and "evalmesh: second interrupt, exiting now" in rest,
      "the second SIGINT exits at once with 130", f"rc={job.returncode} {rest[-2000:]}")
if conn:
    conn.close()
listener.close()

# 3. --collective-timeout sets the recipe's collective_timeout_s (and is checked like it).
rc, _, err = run(["run", "resume.yaml", "--run-dir", "t0", "--collective-timeout", "0"])
check(rc == 2 and "<command line>:1:1: recipe: option 'collective_timeout_s' must be greater than 0"
      in err, "--collective-timeout 0 refused", f"rc={rc} {err[-1000:]}")
rc, _, err = run(["perplexity", "-m", "model.gguf", "-f", "text.txt", "--collective-timeout", "9",
                  "--print-recipe"])
check(rc == 0 and "collective_timeout_s: 9\n" in _, "perplexity --collective-timeout 9", err)

if not MPIRUN:
    print("note: mpirun not found; the multi-rank part is skipped")
    session.finish()

# 4. SIGKILL one rank of 4 in the middle of the forward; resume on 2 and on 3 ranks. mpirun
# SIGTERMs the survivors about 1 s after a rank dies: MAXW windows (the argument: 24000, 6000 a
# rank, about 4 s on an idle machine here; 2400 in the slower sanitizer build) keep them in their
# forward until then, where they name the dead rank.
MAXW = int(sys.argv[1]) if len(sys.argv) > 1 else 24000
write_recipe(MAXW)
rc, _, err = run(["run", "resume.yaml", "--run-dir", "whole4"], np=4)
check(rc == 0, "uninterrupted 4-rank run", err[-2000:])
want4 = metrics(os.path.join(tmp, "whole4"))

killed_dir = os.path.join(tmp, "killed")
job = subprocess.Popen(mpi(4) + [BIN, "run", "resume.yaml", "--run-dir", "killed"], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                       start_new_session=True)
victim, pid = 2, None
deadline = time.monotonic() + 300
while job.poll() is None and time.monotonic() < deadline:
    rec = glob.glob(os.path.join(killed_dir, "records", f"f.rank{victim}.*.bin"))
    state = os.path.join(killed_dir, "state", f"rank-{victim}.json")
    if rec and os.path.exists(state) and os.path.getsize(rec[0]) > HEADER + 20 * 600:
        try:
            pid = json.load(open(state))["pid"]
        except (ValueError, KeyError):
            continue
        os.kill(pid, signal.SIGKILL)
        break
    time.sleep(0.005)
out, err = job.communicate(timeout=600)
check(pid is not None, "rank 2 killed in the middle of its forward", err[-2000:])
check(job.returncode != 0, "the killed job failed", f"rc={job.returncode}")
done = [len(records(f)) for f in glob.glob(os.path.join(killed_dir, "records", "*.bin"))]
print(f"killed job: exit {job.returncode}, records per rank file {done} of {MAXW} windows")
check(0 < sum(done) < MAXW, "some but not all windows recorded", str(done))
# mpirun stops the survivors with SIGTERM: they find rank 2's process gone (its state file still
# says running) and say so, with status 5 and state `failed`, before MPI_Abort
named = re.findall(r"error: rank 2 \(pid (\d+) on (\S+)\) died in stage 'f' without a word "
                   r"\(killed\?\); the launcher then stopped this rank: rank [013], stage 'f'", err)
check(named and all(p == str(pid) for p, _ in named), "a survivor names the killed rank and pid",
      err[-3000:])
survivors = [json.load(open(os.path.join(killed_dir, "state", f"rank-{r}.json")))
             for r in [0, 1, 3]]
check(all(s["status"] == "failed" and s["reason"].startswith(f"rank 2 (pid {pid} on ")
          for s in survivors if s["status"] != "running"), "survivors' states name rank 2",
      str(survivors)[:2000])
print(f"survivors naming rank 2: {len(named)} of 3")
for np in [2, 3]:
    d = os.path.join(tmp, f"resume{np}")
    shutil.copytree(killed_dir, d)
    rc, _, err = run(["run", "--resume", d], np=np)
    check(rc == 0, f"resume on {np} ranks rc", err[-3000:])
    got = metrics(d)
    diff = {k: (want4.get(k), got.get(k)) for k in set(want4) | set(got or {})
            if got is None or want4.get(k) != got.get(k)}
    check(not diff, f"resume on {np} ranks: metrics bit-identical to the 4-rank run",
          str(diff)[:2000])
    t = taken(d)
    print(f"resume on {np} ranks: {t[0]} windows taken from records, {t[1]} computed")
    check(t[0] == sum(done) and t[0] + t[1] == MAXW, f"resume on {np} ranks: reused", str(t))
    # the 4-rank attempt's state files are gone: check-state sees only this attempt's ranks
    states = sorted(os.listdir(os.path.join(d, "state")))
    check(states == [f"rank-{r}.json" for r in range(np)], f"resume on {np} ranks: state files",
          str(states))
    p = subprocess.run([BIN, "check-state", d], capture_output=True, text=True, env=ENV)
    check(p.returncode == 0 and f"{np} ranks: 0 silent, 0 behind, 0 failed" in p.stdout,
          f"resume on {np} ranks: check-state finds every rank fine", p.stdout + p.stderr)

# 5. SIGTERM to every rank of a 4-rank job in the middle of the forward (as Slurm signals a job's
# tasks), and the pre-timeout SIGUSR1 (sbatch --signal=B:USR1@120) to both ranks of a 2-rank
# job: each rank stops after its current window with exit status 6, its records flushed and its
# state `interrupted`; the resume (on 4 ranks) finishes it identically.
def interrupt(np, sig, name):
    d = os.path.join(tmp, name)
    job = subprocess.Popen(mpi(np) + [BIN, "run", "resume.yaml", "--run-dir", name], cwd=tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                           start_new_session=True)
    pids = {}
    deadline = time.monotonic() + 300
    while job.poll() is None and time.monotonic() < deadline and len(pids) < np:
        for r in range(np):
            rec = glob.glob(os.path.join(d, "records", f"f.rank{r}.*.bin"))
            state = os.path.join(d, "state", f"rank-{r}.json")
            if r not in pids and rec and os.path.getsize(rec[0]) > HEADER + 10 * 600:
                try:
                    pids[r] = json.load(open(state))["pid"]
                except (OSError, ValueError, KeyError):
                    pass
        time.sleep(0.005)
    for pid in pids.values():
        os.kill(pid, sig)
    out, err = job.communicate(timeout=600)
    check(len(pids) == np, f"{name}: every rank signalled mid-forward", err[-2000:])
    check(job.returncode == 6, f"{name}: exit status 6", f"rc={job.returncode} {err[-2000:]}")
    check(err.count(f"interrupted by signal {int(sig)}") == np, f"{name}: every rank says so",
          err[-3000:])
    states = [json.load(open(os.path.join(d, "state", f"rank-{r}.json"))) for r in range(np)]
    check(all(s["status"] == "interrupted" and s["stage"] == "f" for s in states),
          f"{name}: every state file interrupted in stage f", str(states)[:1500])
    done = [len(records(f)) for f in glob.glob(os.path.join(d, "records", "*.bin"))]
    print(f"{name} job: exit {job.returncode}, records per rank file {done} of {MAXW} windows")
    check(0 < sum(done) < MAXW, f"{name}: some but not all windows recorded", str(done))
    rc, _, err = run(["run", "--resume", d], np=4)
    check(rc == 0 and metrics(d) == want4, f"{name}: resume bit-identical", err[-2000:])
    check(taken(d) == [sum(done), MAXW - sum(done)], f"{name}: resume reused", str(taken(d)))


interrupt(4, signal.SIGTERM, "sigterm")
interrupt(2, signal.SIGUSR1, "sigusr1")

# 5b. SIGTERM to both ranks while rank 0 already waits in the aggregate's collective (rank 1 held
# with SIGSTOP in its forward until then): rank 1 stops after its window and aborts the
# collective; rank 0, asked to stop too, reports that as an interruption: both exit 6,
# `interrupted`.
d = os.path.join(tmp, "in-collective")
job = subprocess.Popen(mpi(2) + [BIN, "run", "resume.yaml", "--run-dir", "in-collective"], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                       start_new_session=True)
pid1 = resume_helpers.wait_for_records(d, 1, 10 * 600, job)
if pid1:
    os.kill(pid1, signal.SIGSTOP)
pid0 = None
deadline = time.monotonic() + 300
while pid1 and job.poll() is None and time.monotonic() < deadline and not pid0:
    try:
        st = json.load(open(os.path.join(d, "state", "rank-0.json")))
        pid0 = st["pid"] if st["stage"] == "agg" else None
    except (OSError, ValueError, KeyError):
        pass
    time.sleep(0.01)
check(pid0 is not None, "in-collective: rank 0 reached the aggregate while rank 1 was held")
if pid0:
    os.kill(pid0, signal.SIGTERM)
    os.kill(pid1, signal.SIGTERM)
    os.kill(pid1, signal.SIGCONT)
out, err = job.communicate(timeout=600)
states = [json.load(open(os.path.join(d, "state", f"rank-{r}.json"))) for r in range(2)]
check(job.returncode == 6, "in-collective: exit 6", f"rc={job.returncode} {err[-2000:]}")
check([s["status"] for s in states] == ["interrupted", "interrupted"] and
      [s["stage"] for s in states] == ["agg", "f"], "in-collective: both interrupted",
      str(states)[:1500])
check(re.search(r"error: rank 0, stage 'agg' \(aggregate\): interrupted by signal 15 "
                r"\(Terminated\) while in a collective: .*rank 1 aborted", err) is not None,
      "in-collective: rank 0 says it was interrupted in the collective", err[-2000:])

# 6. A rank that stops answering (SIGSTOP) in the middle of the forward, --collective-timeout 5:
# the others time out in the next collective, write state `failed` naming rank 2 and end the
# job through MPI_Abort with status 5; their records stay.
stop_dir = os.path.join(tmp, "stopped")
job = subprocess.Popen(mpi(4) + [BIN, "run", "resume.yaml", "--run-dir", "stopped",
                                 "--collective-timeout", "5"], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                       start_new_session=True)
pid = None
deadline = time.monotonic() + 300
while job.poll() is None and time.monotonic() < deadline:
    rec = glob.glob(os.path.join(stop_dir, "records", "f.rank2.*.bin"))
    if rec and os.path.getsize(rec[0]) > HEADER + 10 * 600:
        try:
            pid = json.load(open(os.path.join(stop_dir, "state", "rank-2.json")))["pid"]
        except (OSError, ValueError, KeyError):
            continue
        os.kill(pid, signal.SIGSTOP)
        break
    time.sleep(0.005)
out, err = job.communicate(timeout=600)
check(pid is not None, "rank 2 stopped in the middle of its forward", err[-2000:])
check(job.returncode == 5, "silent rank: job exit status 5", f"rc={job.returncode} {err[-2000:]}")
check(re.search(r"error: rank [013].*rank 2 did not answer", err) is not None,
      "silent rank: a survivor names rank 2", err[-3000:])
failed = []
for r in [0, 1, 3]:
    st = json.load(open(os.path.join(stop_dir, "state", f"rank-{r}.json")))
    if st["status"] == "failed" and "rank 2 did not answer" in st.get("reason", ""):
        failed.append(r)
check(failed, "silent rank: a survivor's state is failed, naming rank 2", err[-1000:])
done = [len(records(f)) for f in glob.glob(os.path.join(stop_dir, "records", "*.bin"))]
print(f"silent rank 2: exit {job.returncode}, survivors failed naming it: {failed}, records {done}")
check(sum(done) > 0, "silent rank: records kept", str(done))
# (not resumed here: the saved --collective-timeout 5 would also bind the resume, whose rank
# computing the most windows may, in a slow sanitizer build, keep the others waiting longer)

session.finish()
