"""The gate stage: passing and failing thresholds, baselines from a results file and from a
history (the previous run, not the current one), tolerance in standard errors, exit status 3 only
after the reports were written and pushed; a baseline that is not a results document. With
`verdict: gate` the report (run after the gate) records the verdict in results.json, the webhook
body and the history, and a failed run is never the next baseline. (Paired comparisons need real
window records: test_report_paired.py.)"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import Webhook, driver, report_recipe, run, tempdir, write
from checks import check, finish  # noqa: E402

work = tempdir()
hook = Webhook()


def recipe(name, gate, history=None):
    hist = "      - {type: history, path: %s}\n" % history if history else ""
    return report_recipe(work, name, """\
      - table
      - json
      - html
%s      - {type: webhook, url: %s, retries: 0}
""" % (hist, hook.url), """\
  gate:
    kind: gate
    metrics: m
    after: [out]
%s""" % gate)


def gate_run(name, gate, history=None):
    run_dir = os.path.join(work, name)
    rc, out, err = run([driver(), recipe(name, gate, history), run_dir])
    return rc, out, err, run_dir


# 1. All thresholds pass.
rc, out, err, d = gate_run("pass", "    max: {f_q4.token_ppl: 13.0, f_ref.token_ppl: 20}\n"
                                   "    min: {f_ref.bits_per_byte: 0.3}\n")
check(rc == 0, "passing gate: exit %d: %s" % (rc, err))
check(out.count("PASS") == 3 and "FAIL" not in out, "check table: " + out)

# 2. One fails: exit 3, and every report exists and the webhook was called first.
hook.requests.clear()
rc, out, err, d = gate_run("fail", "    max: {f_q4.token_ppl: 12.9, f_ref.token_ppl: 20}\n")
check(rc == 3, "failing gate: exit %d (want 3): %s" % (rc, err))
check("gate 'gate': 1 of 2 checks failed; first: f_q4.token_ppl = 13 is not <= 12.9 (max 12.9)"
      in err, "gate message: " + err)
check(out.count("FAIL") == 1 and out.count("PASS") == 1, "check table: " + out)
for f in ("results.json", "report.html"):
    check(os.path.exists(os.path.join(d, f)), f + " written before the gate failed")
check(len(hook.requests) == 1, "webhook pushed before the gate failed")

# 3. Baseline file: +4.17% passes 5%, fails 3%, passes 3% with 2 sigma of tolerance.
with open(os.path.join(work, "pass", "results.json")) as f:
    base = json.load(f)
base["metrics"]["f_ref"]["token_ppl"] = {"value": 12.0, "error": 0.25}
base_path = write(os.path.join(work, "base.json"), json.dumps(base))
rc, out, err, d = gate_run("rel5", "    max_increase_pct: {f_ref.token_ppl: 5}\n"
                                   "    baseline: %s\n" % base_path)
check(rc == 0, "+4.17%% within 5%%: exit %d: %s" % (rc, err))
rc, out, err, d = gate_run("rel3", "    max_increase_pct: {f_ref.token_ppl: 3}\n"
                                   "    baseline: %s\n" % base_path)
check(rc == 3, "+4.17%% over 3%%: exit %d: %s" % (rc, err))
# allowed = 12 + 0.36 + 2 * sqrt(0.25^2 + 0.25^2) = 13.0671...
rc, out, err, d = gate_run("rel3tol", "    max_increase_pct: {f_ref.token_ppl: 3}\n"
                                      "    baseline: %s\n    tolerance_sigma: 2\n" % base_path)
check(rc == 0, "within 2 sigma: exit %d: %s" % (rc, err))
check("13.067107" in out, "allowed bound in the table: " + out)

# 4. Baseline from the history this run appends to: the previous line (12.0), not this run.
hist = os.path.join(work, "hist", "nightly.jsonl")
base_line = dict(base)
del base_line["ranks"]
write(hist, json.dumps(base_line) + "\n" + "{corrupt\n")
rc, out, err, d = gate_run("hist3", "    max_increase_pct: {f_ref.token_ppl: 3}\n"
                                    "    baseline_history: %s\n" % hist, history=hist)
check(rc == 3, "history baseline 12.0, +4.17%% over 3%%: exit %d: %s" % (rc, err))
check("%s:2: not a results document (not valid JSON) (line skipped)" % hist in err,
      "corrupt history line reported: " + err)
check("against %s:1" % hist in out, "baseline named: " + out)
with open(hist) as f:
    check(len(f.read().splitlines()) == 3, "this run appended to the history")

# 5. First run of a series: no history yet, relative checks skipped with a warning.
rc, out, err, d = gate_run("first", "    max_increase_pct: {f_ref.token_ppl: 3}\n"
                                    "    baseline_history: %s\n" % os.path.join(work, "none.jsonl"))
check(rc == 0 and "has no run yet: relative checks skipped" in err, "first run: %d %s" % (rc, err))

# 6. Bad baselines and checks: exit 2 naming the place.
notres = write(os.path.join(work, "not-results.json"), '{"metrics": {}}')
path = recipe("bad", "    max_increase_pct: {f_ref.token_ppl: 3}\n    baseline: %s\n" % notres)
rc, out, err = run([driver(), path, os.path.join(work, "bad")])
check(rc == 2, "baseline not results: exit %d: %s" % (rc, err))
check(("%s:30:15: stage 'gate': baseline: %s: not a results document" % (path, notres)) in err,
      "message: " + err)
check(not os.path.exists(os.path.join(work, "bad", "results.json")), "nothing ran")
rc, out, err, d = gate_run("typo", "    max: {f_q4.token_pl: 1}\n")
check(rc == 2 and "max: no metric 'f_q4.token_pl' in the metrics (it has: f_ref.token_ppl" in err,
      "unknown metric: %d %s" % (rc, err))

# 7. The verdict as data: the report records it; a failed run is never the baseline.
def verdict_run(name, gate, history):
    path = recipe(name, gate, history)[:-len(".yaml")]
    with open(path + ".yaml") as f:
        text = f.read()
    text = text.replace("    metrics: m\n    outputs:", "    metrics: m\n    verdict: gate\n    outputs:")
    text = text.replace("    after: [out]\n", "")
    write(path + ".yaml", text)
    run_dir = os.path.join(work, name)
    rc, out, err = run([driver(), path + ".yaml", run_dir])
    doc = None
    if os.path.exists(os.path.join(run_dir, "results.json")):
        with open(os.path.join(run_dir, "results.json")) as f:
            doc = json.load(f)
    return rc, out, err, doc


hist7 = os.path.join(work, "hist7", "h.jsonl")
rc, out, err, doc = verdict_run("v1", "    max: {f_q4.token_ppl: 20}\n", hist7)
check(rc == 0 and doc["gate"] == {
    "stage": "gate", "passed": True, "baseline": None, "checks": [{
        "metric": "f_q4.token_ppl", "rule": "max", "threshold": 20, "value": 13, "baseline": None,
        "comparison": "absolute", "difference": None, "difference_error": None, "bound": 20,
        "passed": True, "message": "f_q4.token_ppl = 13 is <= 20 (max 20)"}]},
      "passing verdict: %d %s %s" % (rc, err, doc and doc.get("gate")))
hook.requests.clear()
rc, out, err, doc = verdict_run("v2", "    max: {f_q4.token_ppl: 12.9}\n", hist7)
check(rc == 3 and "first: f_q4.token_ppl = 13 is not <= 12.9 (max 12.9)" in err,
      "failing verdict: %d %s" % (rc, err))
check(doc and doc["gate"]["passed"] is False and doc["gate"]["checks"][0]["passed"] is False,
      "results.json records the failure: %s" % (doc and doc.get("gate")))
check(len(hook.requests) == 1 and json.loads(hook.requests[0][3])["gate"] == doc["gate"],
      "the webhook body has the verdict")
rc, out, err, doc = verdict_run("v3", "    max_increase_pct: {f_ref.token_ppl: 3}\n"
                                      "    baseline_history: %s\n" % hist7, hist7)
b = doc["gate"]["baseline"] if doc else {}
check(rc == 0 and b.get("source") == hist7 + ":1" and b.get("why") ==
      "last passing run of the history" and b.get("paired") is False,
      "baseline: line 1, not the failed line 2: %d %s %s" % (rc, err, b))
c = doc["gate"]["checks"][0] if doc else {}
check(c.get("comparison") == "unpaired" and c.get("difference") == 0 and
      c.get("message") == "f_ref.token_ppl = 12.5 is <= 12.875 (max_increase_pct 3, unpaired: the "
      "baseline %s:1 kept no per-token scores)" % hist7, "unpaired check: %s" % c)
with open(hist7) as f:
    check([json.loads(l)["gate"]["passed"] for l in f] == [True, False, True],
          "the history records every verdict")

hook.close()
sys.exit(finish())
