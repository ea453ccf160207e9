"""Pushes to a real Prometheus Pushgateway started on loopback: the values and labels read back
from its API equal what was reported; with the gateway stopped, the retries, the spool file and
the exit status with and without `required`; `evalmesh push RUN_DIR` delivers the spooled push
once the gateway is back; malformed URLs are rejected before anything runs."""
import calendar
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import (Pushgateway, driver, evalmesh, report_recipe, run, samples, series,
                            tempdir, write)
from checks import check, finish  # noqa: E402

work = tempdir()
gw = Pushgateway(work).start()


def recipe(name, url, job, required, retries=2):
    return report_recipe(work, name, """\
      - json
      - type: pushgateway
        url: %s
        job: %s
        required: %s
        retries: %d
        backoff_s: 0.05
        timeout_s: 2
""" % (url, job, "true" if required else "false", retries))


def expected(results, recipe_name):
    third = 0.3333333333333333
    grouping = {"job": None, "recipe": recipe_name}
    values = {
        ("evalmesh_token_ppl", series(results, {"stage": "f_ref"})): 12.5,
        ("evalmesh_token_ppl", series(results, {"stage": "f_q4"})): 13.0,
        ("evalmesh_token_ppl_stderr", series(results, {"stage": "f_ref"})): 0.25,
        ("evalmesh_token_ppl_stderr", series(results, {"stage": "f_q4"})): 0.5,
        ("evalmesh_bits_per_byte", series(results, {"stage": "f_ref"})): third,
        ("evalmesh_tokens_per_second", series(results, {"stage": "f_ref"})): 1000.0,
        ("evalmesh_rank_tokens_per_second", series(results, {"rank": "0"})): 300.0,
        ("evalmesh_rank_tokens_per_second", series(results, {"rank": "1"})): 800.0,
        ("evalmesh_last_success_timestamp_seconds", series(results, {})):
            float(calendar.timegm(time.strptime(results["end_time"], "%Y-%m-%dT%H:%M:%SZ"))),
    }
    return grouping, values


def group_of(job):
    found = [g for g in gw.groups() if g["labels"].get("job") == job]
    check(len(found) == 1, "one group for job %s, got %d" % (job, len(found)))
    return found[0]


def check_group(job, run_dir, recipe_name):
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    grouping, values = expected(results, recipe_name)
    grouping["job"] = job
    g = group_of(job)
    check(g["labels"] == grouping, "grouping labels %s != %s" % (g["labels"], grouping))
    got = {k: v for k, v in samples(g).items() if not k[0].startswith("push_")}
    check(got == values, "pushed samples differ:\n got %s\nwant %s" % (got, values))


# 1. A push that works: exact values and labels read back.
run_dir = os.path.join(work, "run1")
rc, out, err = run([driver(), recipe("nightly", gw.url, "nightly", True), run_dir])
check(rc == 0, "push run exit %d: %s" % (rc, err))
check_group("nightly", run_dir, "nightly")
check(not os.path.exists(os.path.join(run_dir, "push-spool")), "no spool after a delivered push")

# 1b. Labels from the recipe: added to the grouping key, or replacing the recipe name; a value
#     with a slash travels base64-encoded and comes back as it was. A label evalmesh sets inside
#     the series cannot be a grouping label: exit 2 at its place.
path = recipe("labelled", gw.url, "labelled", True)
with open(path) as f:
    text = f.read()
write(path, text.replace("        job: labelled\n",
                         "        job: labelled\n        labels: {cluster: a100/x, recipe: mine}\n"))
rc, out, err = run([driver(), path, os.path.join(work, "run1b")])
check(rc == 0, "labelled push: exit %d: %s" % (rc, err))
labels = group_of("labelled")["labels"]
check(labels == {"job": "labelled", "cluster": "a100/x", "recipe": "mine"},
      "recipe labels: %s" % labels)
write(path, text.replace("        job: labelled\n",
                         "        job: labelled\n        labels: {cluster: a, model: mine}\n"))
rc, out, err = run([driver(), path, os.path.join(work, "run1c")])
check(rc == 2 and "%s:25:30: stage 'out': pushgateway label 'model' cannot be a grouping label"
      % path in err, "reserved grouping label: %d %s" % (rc, err))

# 2. Gateway down, required: exit 4, three attempts logged, results written, push spooled.
gw.stop()
run_dir = os.path.join(work, "run2")
rc, out, err = run([driver(), recipe("nightly", gw.url, "again", True), run_dir])
check(rc == 4, "required push to a stopped gateway: exit %d (want 4): %s" % (rc, err))
for attempt in (1, 2, 3):
    check("attempt %d of 3 failed" % attempt in err, "attempt %d not logged: %s" % (attempt, err))
check("attempt 4" not in err, "more attempts than retries + 1")
check("failed after 3 attempts" in err, "final error missing: " + err)
check(os.path.exists(os.path.join(run_dir, "results.json")), "results.json written before push")
spooled = glob.glob(os.path.join(run_dir, "push-spool", "*.json"))
check(len(spooled) == 1, "one spool file, got %s" % spooled)
with open(spooled[0]) as f:
    spool = json.load(f)
check(spool["stage"] == "out" and spool["target"] == "pushgateway" and spool["job"] == "again"
      and spool["labels"] == [["recipe", "nightly"]] and "url" not in spool,
      "spool names the output and its grouping, no URL: %s" % spool)
check('evalmesh_token_ppl{stage="f_ref",model="models/tiny.gguf",model_sha256="ab12",'
      'dataset="data/wiki.test.raw",commit="' in spool["body"], "spool body " + spool["body"])
check(os.path.basename(spooled[0]) in err, "the error names the spool file: " + err)
with open(os.path.join(run_dir, "evalmesh.log")) as f:
    check("attempt 3 of 3 failed" in f.read(), "retries are in the run's log")

# 3. Gateway down, not required: exit 0 with a warning, still spooled.
run_dir3 = os.path.join(work, "run3")
rc, out, err = run([driver(), recipe("nightly", gw.url, "optional", False, retries=0), run_dir3])
check(rc == 0, "optional push failure must not fail the run: exit %d: %s" % (rc, err))
check("not required: the run goes on" in err, "warning missing: " + err)
check(len(glob.glob(os.path.join(run_dir3, "push-spool", "*.json"))) == 1, "optional push spooled")

# 4. `evalmesh push` while still down: exit 4, the file stays.
rc, out, err = run([evalmesh(), "push", run_dir])
check(rc == 4, "evalmesh push to a stopped gateway: exit %d: %s %s" % (rc, out, err))
check(len(glob.glob(os.path.join(run_dir, "push-spool", "*.json"))) == 1, "spool kept on failure")

# 5. Gateway back (same port): `evalmesh push` delivers exactly the spooled metrics.
gw.start()
rc, out, err = run([evalmesh(), "push", run_dir])
check(rc == 0, "evalmesh push: exit %d: %s %s" % (rc, out, err))
check("1 spooled push delivered, 0 failed" in out, "push summary: " + out)
check_group("again", run_dir, "nightly")
check(glob.glob(os.path.join(run_dir, "push-spool", "*.json")) == [], "delivered spool removed")
rc, out, err = run([evalmesh(), "push", run_dir])
check(rc == 0 and "nothing to send" in out, "second push: %d %s" % (rc, out))
rc, out, err = run([evalmesh(), "push", os.path.join(work, "no-such-run")])
check(rc == 2 and "not a run directory" in err, "push of a missing run dir: %d %s" % (rc, err))

# 6. Malformed URLs: exit 2 naming the recipe's line and column, before anything is written.
for url, why in (("http//127.0.0.1:9", "malformed URL 'http//127.0.0.1:9'"),
                 ("ftp://127.0.0.1/x", "the scheme must be http or https"),
                 ("http://user:pw@127.0.0.1:9", "holds a user name or password")):
    path = recipe("bad", url, "x", True)
    run_dir = os.path.join(work, "bad")
    rc, out, err = run([driver(), path, run_dir])
    check(rc == 2, "URL %s: exit %d (want 2): %s" % (url, rc, err))
    check("%s:%d:14: stage 'out'" % (path, 23) in err and why in err,
          "URL %s: message %r" % (url, err))
    check("user:pw" not in err, "credentials from a URL echoed: " + err)
    check(not os.path.exists(os.path.join(run_dir, "results.json")), "nothing written")

gw.stop()
sys.exit(finish())
