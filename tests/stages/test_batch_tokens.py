"""The forward's `batch_tokens` on the real tiny model (../shared/data; skipped without it): a
recipe with chunked, sliding (windows scored from the middle) and rolling (documents of different
lengths) datasets gives byte-identical window records and identical results.json metrics (timing
fields aside) one window at a time (the cpu default) and in batches of 100, 1000 and 10^6 tokens
(every window in one batch), on 1 and 2 threads; a resume with batches takes the intact records and
computes the rest (a damaged record in the middle among them) to the same metrics; a bad
batch_tokens (0, a string) is refused at validation with its file:line:col and exit status 2."""
import glob
import os
import shutil
import subprocess
import sys

from eval_helpers import BIN, EvalSession, stories_data
import resume_helpers
from resume_helpers import HEADER, metrics, records, taken

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

MODEL, STORIES = stories_data()

session = EvalSession("eval_batch_tokens_")
evalmesh, write = session.evalmesh, session.write
FORWARDS = ["f_chunked", "f_sliding", "f_rolling"]


def recipe(name, batch_tokens=None):
    extra = f", batch_tokens: {batch_tokens}" if batch_tokens is not None else ""
    return write(name, f"""
name: batches
stages:
  model: {{kind: model, path: "{MODEL}"}}
  chunked: {{kind: dataset, tokenizer: model, path: "{STORIES}", protocol: chunked, n_ctx: 64}}
  sliding: {{kind: dataset, tokenizer: model, path: "{STORIES}", protocol: sliding, max_length: 96, stride: 40}}
  rolling: {{kind: dataset, tokenizer: model, path: "{STORIES}", protocol: rolling, max_length: 80, split: blank_line}}
  f_chunked: {{kind: forward, model: model, data: chunked, records_flush_s: 0{extra}}}
  f_sliding: {{kind: forward, model: model, data: sliding, records_flush_s: 0{extra}}}
  f_rolling: {{kind: forward, model: model, data: rolling, records_flush_s: 0{extra}}}
  agg: {{kind: aggregate, inputs: [f_chunked, f_sliding, f_rolling]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")


def record_bytes(run_dir):
    """Each forward's records past the file header (the header holds the recipe's hash)."""
    out = {}
    for stage in FORWARDS:
        files = glob.glob(os.path.join(run_dir, "records", f"{stage}.rank0.*.bin"))
        out[stage] = open(files[0], "rb").read()[HEADER:] if len(files) == 1 else None
    return out


# 1. One window at a time against batches of several sizes, on 1 and 2 threads.
one_at_a_time = recipe("one.yaml")
rc, _, err, _ = evalmesh(["run", one_at_a_time])
check(rc == 0, "one window at a time rc", err[-3000:])
want_dir = os.path.join(session.tmp, f"run{session.runs}")
want_metrics, want_records = metrics(want_dir), record_bytes(want_dir)
check(want_metrics is not None and all(want_records.values()), "reference run's results")
for stage in FORWARDS:
    n = len(records(glob.glob(os.path.join(want_dir, "records", f"{stage}.rank0.*.bin"))[0]))
    check(n > 3, f"{stage}: several windows recorded", str(n))
for batch_tokens in [100, 1000, 1000000]:
    for threads in [1, 2]:
        overrides = [f"stages.{s}.batch_tokens={batch_tokens}" for s in FORWARDS] + \
            [f"stages.{s}.threads={threads}" for s in FORWARDS]
        rc, _, err, _ = evalmesh(["run", one_at_a_time, *overrides])
        label = f"batch_tokens {batch_tokens}, {threads} threads"
        check(rc == 0, f"{label} rc", err[-3000:])
        run_dir = os.path.join(session.tmp, f"run{session.runs}")
        got = metrics(run_dir)
        diff = resume_helpers.metric_diff(want_metrics, got)
        check(not diff, f"{label}: metrics identical", str(diff)[:2000])
        got_records = record_bytes(run_dir)
        for stage in FORWARDS:
            check(got_records[stage] == want_records[stage],
                  f"{label}: {stage} records byte-identical")

# 2. Resume in batches: a records file cut after 7 whole records and one of them damaged.
batched = recipe("batched.yaml", 300)
rc, _, err, _ = evalmesh(["run", batched])
check(rc == 0, "batched run rc", err[-3000:])
whole = os.path.join(session.tmp, f"run{session.runs}")
check(metrics(whole) == want_metrics, "batched recipe: metrics identical")
cut = os.path.join(session.tmp, "cut")
shutil.copytree(whole, cut)
os.remove(os.path.join(cut, "results.json"))
path = glob.glob(os.path.join(cut, "records", "f_sliding.rank0.*.bin"))[0]
recs = records(path)
os.truncate(path, recs[7][0])  # records 0..6 left
data = bytearray(open(path, "rb").read())
data[recs[4][0] - 5] ^= 0x10  # a byte of record 3's NLLs
open(path, "wb").write(bytes(data))
rc, _, err, _ = evalmesh(["run", "--resume", cut])
check(rc == 0, "batched resume rc", err[-3000:])
check(metrics(cut) == want_metrics, "batched resume: metrics identical")
sliding_windows = len(records(glob.glob(os.path.join(whole, "records", "f_sliding.rank0.*.bin"))[0]))
others = sum(len(records(glob.glob(os.path.join(whole, "records", f"{s}.rank0.*.bin"))[0]))
             for s in ["f_chunked", "f_rolling"])
check(taken(cut) == [6 + others, sliding_windows - 6], "batched resume: windows taken/computed",
      str(taken(cut)))

# 3. Bad values: exit status 2 naming the place.
for value, message in [("0", "option 'batch_tokens' must be at least 1, got 0"),
                       ("many", "option 'batch_tokens' must be an integer")]:
    bad = recipe(f"bad_{value}.yaml", value)
    p = subprocess.run([BIN, "validate", bad], capture_output=True, text=True, timeout=60)
    rc, err = p.returncode, p.stderr
    check(rc == 2, f"batch_tokens {value}: exit 2", f"rc={rc} {err[-1500:]}")
    check(f"{bad}:8:" in err and message in err, f"batch_tokens {value}: message", err[-1500:])

session.finish()
