"""Helpers shared by the resume tests (test_resume.py, test_resume_slurm.py, test_resume_stress.py):
the recipe they cut and resume, reading a run directory's metrics, the windows a resume took from
records, the records of a records file (read independently of evalmesh), and waiting for a rank's
records to reach a size before signalling it."""
import glob
import json
import os
import re
import struct
import sys
import time

from eval_helpers import shared_files

HEADER = 224  # window_records.h: the file header
RECORD_MAGIC = 0x52574D45

# many small windows, one thread per rank, an fsync after each: a forward long enough to be
# killed in the middle
RECIPE = """name: resume
stages:
  model: {kind: model, path: model.gguf}
  chunked: {kind: dataset, tokenizer: model, path: text.txt, protocol: chunked, n_ctx: 32, max_windows: MAXW}
  f: {kind: forward, model: model, data: chunked, threads: 1, records_flush_s: 0}
  agg: {kind: aggregate, inputs: [f]}
  report: {kind: report, metrics: agg, outputs: [json]}
"""


def shared_data():
    """(stories260K.gguf, WikiText-2 test)."""
    return shared_files("models/stories260K.gguf", "text/wikitext-2-raw-v1.test.txt")


def write_recipe(folder, maxw, name="resume.yaml"):
    with open(os.path.join(folder, name), "w") as f:
        f.write(RECIPE.replace("MAXW", str(maxw)))


def test_env():
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:  # as eval_helpers: LSan's tracer is flaky in oversubscribed jobs
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    return env


def metrics(run_dir):
    """results.json's metrics without the timings, {"stage.metric": value}; None without it."""
    path = os.path.join(run_dir, "results.json")
    if not os.path.exists(path):
        return None
    res = json.load(open(path))
    return {f"{s}.{k}": v for s, ms in res["metrics"].items() for k, v in ms.items()
            if not v.get("timing")}


def metric_diff(want, got):
    """The metrics that differ, {name: (want, got)}; every one when got is None."""
    return {k: (want.get(k), (got or {}).get(k)) for k in set(want) | set(got or {})
            if got is None or want.get(k) != got.get(k)}


def taken(run_dir):
    """Windows the resume took from records and computed, summed over the ranks' logs."""
    got = [0, 0]
    for log in glob.glob(os.path.join(run_dir, "evalmesh*.log")):
        for a, total, c in re.findall(r"(\d+) of (\d+) windows taken from the run's records, "
                                      r"(\d+) computed", open(log).read()):
            got[0] += int(a)
            got[1] += int(c)
    return got


def records(path):
    """(offset, window) of each record of a records file, read independently of evalmesh."""
    data = open(path, "rb").read()
    at, out = HEADER, []
    while at + 12 <= len(data):
        magic, length, _ = struct.unpack_from("<III", data, at)
        if magic != RECORD_MAGIC or at + 12 + length > len(data):
            break
        out.append((at, struct.unpack_from("<q", data, at + 12)[0]))
        at += 12 + length
    return out


def recorded_windows(run_dir):
    """The windows recorded in every records file of the run directory, summed."""
    return sum(len(records(f)) for f in glob.glob(os.path.join(run_dir, "records", "*.bin")))


def rank_pid(run_dir, rank):
    """The pid in the rank's state file, None before it exists."""
    try:
        return json.load(open(os.path.join(run_dir, "state", f"rank-{rank}.json")))["pid"]
    except (OSError, ValueError, KeyError):
        return None


def wait_for_records(run_dir, rank, size, job, limit_s=300):
    """Polls until the rank's records file holds more than `size` bytes of records; returns its
    pid then, or None when the job ended (or `limit_s` passed) first. The sleep only paces the
    polling."""
    deadline = time.monotonic() + limit_s
    while job.poll() is None and time.monotonic() < deadline:
        rec = glob.glob(os.path.join(run_dir, "records", f"f.rank{rank}.*.bin"))
        if rec and os.path.getsize(rec[0]) > HEADER + size:
            pid = rank_pid(run_dir, rank)
            if pid:
                return pid
        time.sleep(0.005)
    return None
