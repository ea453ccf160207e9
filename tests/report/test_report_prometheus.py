"""Metrics that fit Prometheus, against a real Pushgateway on loopback:
- one group per recipe: after runs of two different model paths (and metric sets) the job has one
  group, keyed by job and recipe alone, holding only the second run's series (PUT dropped the
  stale ones), each with the model path and hash, dataset and commit as labels;
- one error gauge per metric (`_stderr`; the aggregate's `<metric>_se` twin is not pushed);
- evalmesh_last_success_timestamp_seconds is the run's end time when there is no gate or it
  passed, and absent after a failed gate's push;
- the gate gauges of a hand-built `gate` section read back exactly;
- `promtool check metrics` accepts the exposition (when the Debian package prometheus is there).
usage: test_report_prometheus.py REPORT_DRIVER REPORT_RENDER"""
import calendar
import copy
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import (FIXED_METRICS, Pushgateway, driver, expected_series, fail, run,
                            samples, series, tempdir, write)
from checks import check, check_equal, finish  # noqa: E402

if len(sys.argv) < 3:
    fail("usage: test_report_prometheus.py REPORT_DRIVER REPORT_RENDER")
render = sys.argv[2]
work = tempdir()
gw = Pushgateway(work).start()
JOB = "nightly_job"


def recipe(name, model, model_sha, extra=""):
    """FIXED_METRICS with another model path and hash (and more metrics), pushed to JOB."""
    metrics = FIXED_METRICS.replace("models/tiny.gguf", model).replace(
        "model_sha256: ab12", "model_sha256: %s\n    model_digest: %s" % (model_sha, model_sha * 8))
    metrics = metrics.replace("      f_ref.token_ppl: [12.5, 0.25]\n",
                              "      f_ref.token_ppl: [12.5, 0.25]\n" + extra)
    return write(os.path.join(work, name + ".yaml"), """\
name: nightly
stages:
%s  out:
    kind: report
    metrics: m
    outputs:
      - json
      - {type: pushgateway, url: %s, job: %s, required: true, retries: 0}
""" % (metrics, gw.url, JOB))


def group():
    found = [g for g in gw.groups() if g["labels"].get("job") == JOB]
    check_equal(len(found), 1, "groups of job %s" % JOB)
    return found[0] if found else {"labels": {}}


def pushed():
    return {k: v for k, v in samples(group()).items() if not k[0].startswith("push_")}


def epoch(iso):
    return float(calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))


def load(run_dir):
    with open(os.path.join(run_dir, "results.json")) as f:
        return json.load(f)


# 1. Model A, with the aggregate's token_ppl_se twin and a metric model B will not have.
run_a = os.path.join(work, "a")
rc, out, err = run([driver(), recipe("a", "/models/a/model-a.gguf", "aaaa",
                                     "      f_ref.token_ppl_se: 0.25\n"
                                     "      f_ref.only_in_a: 4\n"), run_a])
check(rc == 0, "run A: exit %d: %s" % (rc, err))
ra = load(run_a)
want = expected_series(ra)
check_equal(want[("evalmesh_last_success_timestamp_seconds", series(ra, {}))],
            epoch(ra["end_time"]), "last success of run A, without a gate")
check_equal(pushed(), want, "run A's series")
check(not any(k[0] == "evalmesh_token_ppl_se" for k in pushed()), "no _se twin pushed")
check(("evalmesh_only_in_a", series(ra, {"stage": "f_ref"})) in want, "run A has only_in_a")
check_equal(dict(series(ra, {})), {"model": "/models/a/model-a.gguf", "model_sha256": "aaaa",
                                  "model_digest": "aaaa" * 8,
                                  "dataset": "data/wiki.test.raw", "commit": ra["evalmesh"]["commit"]},
            "provenance labels of run A")

# 2. Model B (another path and hash): still one group, keyed by job and recipe; A's series gone.
run_b = os.path.join(work, "b")
rc, out, err = run([driver(), recipe("b", "/models/b/model-b.gguf", "bbbb"), run_b])
check(rc == 0, "run B: exit %d: %s" % (rc, err))
rb = load(run_b)
check_equal(group()["labels"], {"job": JOB, "recipe": "nightly"}, "grouping key")
check_equal(pushed(), expected_series(rb), "run B's series only (A's are gone)")
check(not any(dict(k[1]).get("model") == "/models/a/model-a.gguf" for k in pushed()),
      "no series of model A left")

# 3. A failed paired gate (hand-built gate section on run B's document): the gate gauges read
#    back exactly, and the last success is gone with the rest of the previous push.
gate = {"stage": "gate", "passed": False,
        "baseline": {"source": "runs/history/nightly.jsonl:12", "why": "last passing run of the history",
                     "end_time": "2026-12-02T13:50:50Z", "commit": "0123456789ab",
                     "model": {"path": "/models/a/model-a.gguf", "header_sha256": "aaaa"},
                     "paired": True},
        "checks": [
            {"metric": "f_ref.token_ppl", "rule": "max_increase_pct", "threshold": 1.0,
             "value": 119.47, "baseline": 111.37, "comparison": "paired", "difference": 8.1,
             "difference_error": 0.31, "bound": 112.4837, "passed": False,
             "message": "f_ref.token_ppl = 119.47 is not <= 112.48 (max_increase_pct 1, paired)"},
            {"metric": "f_ref.token_ppl", "rule": "max", "threshold": 200, "value": 119.47,
             "baseline": None, "comparison": "absolute", "difference": None,
             "difference_error": None, "bound": 200, "passed": True, "message": "ok"}]}
doc = copy.deepcopy(rb)
doc["gate"] = gate
failed_doc = write(os.path.join(work, "failed.json"), json.dumps(doc))
rc, out, err = run([render, "push", failed_doc, gw.url, JOB])
check(rc == 0, "push of the failed gate: exit %d: %s" % (rc, err))
paired = {"gate": "gate", "metric": "f_ref.token_ppl", "rule": "max_increase_pct",
          "comparison": "paired"}
absolute = dict(paired, rule="max", comparison="absolute")
want = {k: v for k, v in expected_series(rb).items()
        if k[0] != "evalmesh_last_success_timestamp_seconds"}
want[("evalmesh_gate_passed", series(rb, {"gate": "gate"}))] = 0.0
for name, labels, value in (("value", paired, 119.47), ("baseline", paired, 111.37),
                            ("threshold", paired, 1.0), ("bound", paired, 112.4837),
                            ("difference", paired, 8.1), ("difference_stderr", paired, 0.31),
                            ("passed", paired, 0.0),
                            ("value", absolute, 119.47), ("threshold", absolute, 200.0),
                            ("bound", absolute, 200.0), ("passed", absolute, 1.0)):
    want[("evalmesh_gate_check_" + name, series(rb, labels))] = value
check_equal(want, expected_series(doc), "the helper's expectation of a gate section")
check_equal(pushed(), want, "failed gate: gate gauges, no last success")

# 4. The gate passes again: evalmesh_gate_passed 1 and the last success is back.
doc["gate"]["passed"] = True
doc["gate"]["checks"][0]["passed"] = True
rc, out, err = run([render, "push", write(os.path.join(work, "passed.json"), json.dumps(doc)), gw.url,
                    JOB])
check(rc == 0, "push of the passed gate: exit %d: %s" % (rc, err))
got = pushed()
check_equal(got.get(("evalmesh_gate_passed", series(rb, {"gate": "gate"}))), 1.0, "gate passed")
check_equal(got.get(("evalmesh_gate_check_passed", series(rb, paired))), 1.0, "check passed")
check_equal(got.get(("evalmesh_last_success_timestamp_seconds", series(rb, {}))),
            epoch(rb["end_time"]), "last success after a passing gate")

# 5. promtool's linter accepts the exposition (names, HELP and TYPE lines, label syntax).
promtool = shutil.which("promtool")
if promtool:
    rc, text, err = run([render, "prometheus", failed_doc])
    check(rc == 0 and "# HELP evalmesh_gate_check_difference_stderr " in text, "exposition text")
    p = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                                     capture_output=True)
    # Exit 3 is lint findings, 1 a text that does not parse. The one finding allowed is the
    # naming advice for bits_per_byte, the name evalmesh's results use for that quantity.
    findings = [line for line in (p.stdout + p.stderr).splitlines() if line.strip()]
    allowed = ['evalmesh_bits_per_byte use base unit "bytes" instead of "bits"']
    check(p.returncode == 0 or (p.returncode == 3 and
                                all(f.strip() in allowed for f in findings)),
          "promtool check metrics: %d %s" % (p.returncode, findings))
else:
    print("promtool not found (Debian package prometheus): `promtool check metrics` skipped")

gw.stop()
sys.exit(finish())
