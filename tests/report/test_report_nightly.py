"""End to end with the real pipeline: recipes/nightly_regression.yaml (model -> dataset ->
forward -> aggregate -> report -> gate) on a tiny model made by evalmesh-mkmodel and the demo
text, on 2 ranks under mpirun (1 rank without it). The Pushgateway holds exactly the values of
results.json; with the gateway down and the gate failing, the run exits 3 after results.json,
report.html, the history line and the spool file exist; `evalmesh push` then delivers the
spooled metrics; `evalmesh history` shows both runs.
usage: test_report_nightly.py EVALMESH_MKMODEL"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import (Pushgateway, evalmesh, expected_series, run, samples, skip,
                            tempdir, write)
from checks import check, finish  # noqa: E402

if len(sys.argv) < 2:
    skip("evalmesh-mkmodel was not built")
mkmodel = sys.argv[1]
source = os.environ["EVALMESH_SOURCE_DIR"]
work = tempdir()
model = os.path.join(work, "tiny.gguf")
rc, out, err = run([mkmodel, "--out", model, "--layers", "2", "--dim", "32", "--ctx", "512"])
check(rc == 0, "mkmodel: " + err)
text = os.path.join(source, "recipes", "data", "demo.txt")
history = os.path.join(work, "hist", "nightly.jsonl")
gw = Pushgateway(work).start()

with open(os.path.join(source, "recipes", "nightly_regression.yaml")) as f:
    shipped = f.read()


def recipe(name, ceiling):
    """The shipped recipe with this test's model, text, gateway, history and ceiling."""
    r = shipped
    for old, new in ((r"path: \S*stories260K.gguf", "path: " + model),
                     (r"path: \S*wikitext-2-raw-v1.test.txt", "path: " + text),
                     (r"url: http://127.0.0.1:9091", "url: " + gw.url),
                     (r"retries: 3\n        backoff_s: 1", "retries: 1\n        backoff_s: 0.05"),
                     (r"\S*runs/history/nightly.jsonl", history),
                     (r"fwd.token_ppl: 200", "fwd.token_ppl: %s" % ceiling)):
        r, n = re.subn(old, new, r)
        check(n >= 1, "the shipped recipe has %r" % old)
    return write(os.path.join(work, name + ".yaml"), r)


mpirun = os.environ.get("EVALMESH_MPIRUN", "")
ranks = 2 if mpirun else 1


def evalmesh_run(recipe_path, run_dir):
    cmd = [evalmesh(), "run", recipe_path, "--run-dir", run_dir]
    if mpirun:
        cmd = [mpirun, "--oversubscribe", "-np", str(ranks)] + cmd
    return run(cmd, timeout=600)


def load(run_dir):
    with open(os.path.join(run_dir, "results.json")) as f:
        return json.load(f)


def check_pushed(results):
    groups = [g for g in gw.groups() if g["labels"].get("job") == "evalmesh_nightly"]
    check(len(groups) == 1, "one evalmesh_nightly group, got %d" % len(groups))
    want_labels = {"job": "evalmesh_nightly", "recipe": "nightly-regression"}
    check(groups[0]["labels"] == want_labels, "labels %s" % groups[0]["labels"])
    got = {k: v for k, v in samples(groups[0]).items() if not k[0].startswith("push_")}
    want = expected_series(results)
    check(got == want, "pushed values differ from results.json:\n got %s\nwant %s" % (got, want))


# 1. Gateway up, gate passing.
run1 = os.path.join(work, "run1")
rc, out, err = evalmesh_run(recipe("pass", 100000), run1)
check(rc == 0, "nightly run: exit %d:\n%s\n%s" % (rc, out, err))
r1 = load(run1)
check(r1["world_size"] == ranks and len(r1["ranks"]) == ranks, "world size %d" % r1["world_size"])
check(sum(r["tokens"] for r in r1["ranks"]) == r1["metrics"]["fwd"]["tokens"]["value"],
      "per-rank tokens add up to fwd.tokens")
check(r1["model"]["path"] == model and len(r1["model"]["header_sha256"]) == 64, "model provenance")
check_pushed(r1)
check(os.path.exists(os.path.join(run1, "report.html")), "report.html")
check("fwd.token_ppl" in out and "PASS" in out and "FAIL" not in out, "tables on stdout: " + out)

# 2. Gateway down and a ceiling below the perplexity: exit 3 once everything else is written.
gw.stop()
os.remove(gw.persistence)  # the gateway comes back empty
run2 = os.path.join(work, "run2")
rc, out, err = evalmesh_run(recipe("fail", 1), run2)
check(rc == 3, "failing gate: exit %d (want 3):\n%s" % (rc, err))
check("gate 'gate': 1 of 2 checks failed; first: fwd.token_ppl" in err, "gate error: " + err)
check("not required: the run goes on" in err, "push warning: " + err)
for f in ("results.json", "report.html", "push-spool/out-4-pushgateway.json"):
    check(os.path.exists(os.path.join(run2, f)), f + " exists after the gate failed")
r2 = load(run2)
check(r2["metrics"]["fwd"]["token_ppl"] == r1["metrics"]["fwd"]["token_ppl"],
      "same model and data give the same perplexity")
with open(history) as f:
    check(len(f.read().splitlines()) == 2, "two history lines")

# 3. Gateway back: `evalmesh push` delivers run 2's metrics exactly.
gw.start()
check(gw.groups() == [], "the restarted gateway is empty")
rc, out, err = run([evalmesh(), "push", run2])
check(rc == 0 and "1 spooled push delivered, 0 failed" in out, "push: %d %s %s" % (rc, out, err))
check_pushed(r2)

# 4. The history series.
rc, out, err = run([evalmesh(), "history", history, "--metric", "fwd.token_ppl"])
check(rc == 0, "history: %d %s" % (rc, err))
series = out[out.index("fwd.token_ppl ("):]  # the series, after the table of runs
rows = [l.split() for l in series.splitlines() if l.strip()[:1].isdigit()]
check(len(rows) == 2 and rows[1][-3:] == ["+0.000%", "+0.000%", "best"] or
      rows[1][-2:] == ["+0.000%", "+0.000%"], "history rows %s" % rows)
gw.stop()
sys.exit(finish())
