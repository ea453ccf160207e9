"""A task run cut by real signals in the middle of its scoring, then resumed on other world sizes
(issue 25), on the real tiny model (stories260K from ../shared/data; skipped without it) over a
multiple-choice task made here (N questions about who saw which animal where, 3 colours each, 2
shots; N the argument, smaller in the sanitizer build) through `evalmesh run` of a task recipe
(records fsync'd after every request):
  (a) SIGTERM to both ranks of a 2-rank job once each rank's request records hold some
      requests: exit status 6, every rank says it was interrupted by signal 15 and its state file
      says `interrupted` in stage `tasks`; every request a rank says it scored before stopping is
      in its records file, whole (no torn tail), and some but not all requests are recorded;
  (b) SIGKILL to rank 1 of a 2-rank job once its records hold some requests: the job fails, rank
      0 names the dead rank (pid) when it was still scoring (one that had scored its share waits
      in the gather, where mpirun ends it silently) and its records stay; rank 1's records file
      holds only whole records;
  (c) each cut run resumed (`evalmesh run --resume`) on 1 and on 3 ranks: results.json's metrics,
      lm_eval_results.json, the example file and the samples file are byte-identical to an
      uninterrupted 1-rank run, and the resume took exactly the recorded requests from the
      records.
The polling's sleeps only pace it: what is checked never depends on timing (a rank that finished
its scoring before the signal waits in the gather and is interrupted there, which (a) accepts).
usage: test_task_resume.py N"""
import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from eval_helpers import BIN, MPIRUN, EvalSession, shared_files  # noqa: E402
from resume_helpers import HEADER, RECORD_MAGIC, rank_pid, test_env  # noqa: E402
from checks import check  # noqa: E402

(MODEL,) = shared_files("models/stories260K.gguf")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
if not MPIRUN:
    print("SKIPPED: mpirun not found")
    sys.exit(77)
session = EvalSession("task_resume_")
tmp = session.tmp
ENV = test_env()

NAMES = ["Lily", "Tom", "Ben", "Sue", "Max", "Mia", "Sam", "Anna", "Tim", "Zoe"]
ANIMALS = ["dog", "cat", "bear", "bird", "fish", "frog", "duck", "cow", "pig", "fox"]
PLACES = ["house", "garden", "park", "forest", "pond", "yard", "room", "shop", "barn", "field"]
COLORS = ["red", "green", "yellow", "blue", "brown"]


def docs(count, offset):
    """count questions (a fixed pattern, no randomness), from the offset-th one on."""
    out = []
    for i in range(offset, offset + count):
        name, animal, place = NAMES[i % 10], ANIMALS[i // 10 % 10], PLACES[i // 100 % 10]
        choices = [COLORS[(i + k) % 5] for k in range(3)]
        out.append({"question": f"{name} saw a {animal} in the {place}. What color was the "
                                f"{animal}?", "choices": choices, "label": i % 3})
    return out


def lines(items):
    return "".join(json.dumps(d) + "\n" for d in items)


session.write("colors.jsonl", lines(docs(N, 0)))
session.write("colors_train.jsonl", lines(docs(6, 1000)))
session.write("colors.yaml", """task: colors
dataset_path: json
dataset_kwargs:
  data_files:
    test: colors.jsonl
    train: colors_train.jsonl
test_split: test
fewshot_split: train
output_type: multiple_choice
doc_to_text: "{{question}}\\nAnswer:"
doc_to_choice: choices
doc_to_target: label
num_fewshot: 2
metric_list:
  - metric: acc
  - metric: acc_norm
metadata:
  version: 1.0
""")
session.write("resume.yaml", f"""name: task_resume
stages:
  model: {{kind: model, path: "{MODEL}"}}
  tasks: {{kind: task, model: model, tasks: [colors.yaml], log_samples: true, threads: 1,
          records_flush_s: 0}}
  report: {{kind: report, metrics: tasks, outputs: [json]}}
""")
REQUESTS = 3 * N


def mpi(np):
    return [MPIRUN, "-np", str(np), "--allow-run-as-root", "--oversubscribe"] if np > 1 else []


def run(args, np=1):
    p = subprocess.run(mpi(np) + [BIN, *args], capture_output=True, text=True, timeout=600,
                       cwd=tmp, env=ENV)
    return p.returncode, p.stdout, p.stderr


def outputs(run_dir):
    """{file name: bytes} of lm_eval_results.json, the example file and the samples file, and
    results.json's metrics without timings (None for a file that is missing)."""
    out = {}
    for name in ["lm_eval_results.json", "examples_tasks.json", "samples_colors.jsonl"]:
        path = os.path.join(run_dir, name)
        out[name] = open(path, "rb").read() if os.path.exists(path) else None
    path = os.path.join(run_dir, "results.json")
    out["metrics"] = ({k: v for k, v in json.load(open(path))["metrics"].items()
                       if not v.get("timing")} if os.path.exists(path) else None)
    return out


def rank_records(run_dir, rank):
    """(request indices recorded, whether the file ends with a whole record) of the rank's
    request records (window_records.h, read independently of evalmesh)."""
    files = glob.glob(os.path.join(run_dir, "records", f"tasks.rank{rank}.*.bin"))
    check(len(files) == 1, f"{run_dir}: one records file of rank {rank}", str(files))
    if not files:
        return [], False
    data = open(files[0], "rb").read()
    at, got = HEADER, []
    while at + 12 <= len(data):
        magic, length, _ = struct.unpack_from("<III", data, at)
        if magic != RECORD_MAGIC or at + 12 + length > len(data):
            break
        got.append(struct.unpack_from("<q", data, at + 12)[0])
        at += 12 + length
    return got, at == len(data)


def wait_for_records(run_dir, ranks, count, job):
    """Polls until every rank of ranks has recorded more bytes than count requests of one token
    take (so at least one request); returns their pids then ({rank: pid}), or fewer when the job
    ended first. The sleep only paces the polling."""
    pids = {}
    deadline = time.monotonic() + 300
    while job.poll() is None and time.monotonic() < deadline and len(pids) < len(ranks):
        for r in ranks:
            files = glob.glob(os.path.join(run_dir, "records", f"tasks.rank{r}.*.bin"))
            if r in pids or not files:
                continue
            # a request's record is 12 + 40 + 16 n bytes, n >= 1 its continuation's tokens
            if os.path.getsize(files[0]) > HEADER + count * (12 + 40 + 16):
                pid = rank_pid(run_dir, r)
                if pid:
                    pids[r] = pid
        time.sleep(0.005)
    return pids


def taken(stderr):
    """The requests the ranks of a resume took from the records, summed."""
    return sum(int(m) for m in re.findall(r"task tasks: (\d+) requests taken from the run's "
                                          r"records", stderr))


def resume_everywhere(cut_dir, recorded, label):
    """(c): the cut run resumed on 1 and on 3 ranks gives the uninterrupted run's bytes."""
    for np in [1, 3]:
        d = os.path.join(tmp, f"{label}_resume{np}")
        shutil.copytree(cut_dir, d)
        rc, _, err = run(["run", "--resume", d], np)
        check(rc == 0, f"{label}: resume on {np} ranks: exit {rc}", err[-2000:])
        got = outputs(d)
        check(got == base, f"{label}: resume on {np} ranks: the bytes of the uninterrupted run",
              str({k: (base[k] is None, got[k] is None) for k in base if base[k] != got[k]}))
        check(taken(err) == recorded, f"{label}: resume on {np} ranks took the {recorded} "
              f"recorded requests, not {taken(err)}", err[-1500:])


rc, _, err = run(["run", "resume.yaml", "--run-dir", "whole"])
check(rc == 0, f"uninterrupted 1-rank run: exit {rc}", err[-2000:])
base = outputs(os.path.join(tmp, "whole"))
check(all(v is not None for v in base.values()), "the uninterrupted run wrote every output")
samples = base["samples_colors.jsonl"] or b""
check(samples.count(b"\n") == N, f"{N} samples lines")

# (a) SIGTERM to both ranks once each has recorded some requests
cut = os.path.join(tmp, "sigterm")
job = subprocess.Popen(mpi(2) + [BIN, "run", "resume.yaml", "--run-dir", "sigterm"], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                       start_new_session=True)
pids = wait_for_records(cut, [0, 1], 6, job)
for pid in pids.values():
    os.kill(pid, signal.SIGTERM)
_, err = job.communicate(timeout=600)
check(len(pids) == 2, "sigterm: both ranks signalled in the middle of the task", err[-2000:])
check(job.returncode == 6, f"sigterm: exit status 6, not {job.returncode}", err[-2000:])
check(err.count("interrupted by signal 15 (Terminated)") == 2, "sigterm: every rank says so",
      err[-3000:])
states = [json.load(open(os.path.join(cut, "state", f"rank-{r}.json"))) for r in range(2)]
check(all(s["status"] == "interrupted" and s["stage"] == "tasks" for s in states),
      "sigterm: every state file interrupted in stage tasks", str(states)[:1500])
recorded, stopped = 0, 0
for r in range(2):
    got, whole = rank_records(cut, r)
    recorded += len(got)
    check(whole and len(set(got)) == len(got), f"sigterm: rank {r}'s records whole and distinct")
    # a rank stopped in its scoring says how many requests it scored: each is recorded (a rank
    # that had finished them was stopped in the gather that follows)
    said = re.findall(rf"rank {r}, stage 'tasks' \(task\): interrupted by signal 15 \(Terminated\)"
                      r" after (\d+) of this rank's (\d+) requests", err)
    print(f"sigterm: rank {r} says it scored {said} requests, {len(got)} recorded")
    check(all(int(done) == len(got) for done, _ in said),
          f"sigterm: rank {r} recorded every request it scored ({said}, {len(got)} recorded)")
    stopped += len(said)
print(f"sigterm: {recorded} of {REQUESTS} requests recorded")
check(0 < recorded < REQUESTS, f"sigterm: some but not all requests recorded ({recorded})")
check(stopped >= 1, "sigterm: a rank stopped in its scoring says after how many requests",
      err[-2000:])
resume_everywhere(cut, recorded, "sigterm")

# (b) SIGKILL to rank 1 once it has recorded some requests
cut = os.path.join(tmp, "sigkill")
job = subprocess.Popen(mpi(2) + [BIN, "run", "resume.yaml", "--run-dir", "sigkill"], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                       start_new_session=True)
pids = wait_for_records(cut, [1], 6, job)
if 1 in pids:
    os.kill(pids[1], signal.SIGKILL)
_, err = job.communicate(timeout=600)
check(1 in pids, "sigkill: rank 1 killed in the middle of the task", err[-2000:])
check(job.returncode != 0, f"sigkill: the job failed (exit {job.returncode})")
recorded, got = 0, {}
for r in range(2):
    got[r], whole = rank_records(cut, r)
    recorded += len(got[r])
    check(whole and len(set(got[r])) == len(got[r]),
          f"sigkill: rank {r}'s records whole and distinct")
# Rank 0 names the dead rank when mpirun's SIGTERM finds it scoring. A rank 0 that had scored its
# whole share (its requests are those before rank 1's first) waits in the gather for rank 1, where
# mpirun ends it without a word; on a loaded machine rank 1 can be that far behind.
share = min(got[1]) if got[1] else 0
if len(got[0]) < share:
    check(re.search(rf"error: rank 1 \(pid {pids.get(1)} on \S+\) died in stage 'tasks' without "
                    r"a word \(killed\?\)", err) is not None,
          "sigkill: rank 0, still scoring, names the dead rank", err[-3000:])
else:
    print(f"sigkill: rank 0 had scored its {share} requests and waited in the gather")
print(f"sigkill: {recorded} of {REQUESTS} requests recorded")
check(0 < recorded < REQUESTS, f"sigkill: some but not all requests recorded ({recorded})")
resume_everywhere(cut, recorded, "sigkill")

session.finish()
