"""JSON webhook pushes against a loopback HTTP server: the body is the run's results.json, the
Authorization header carries the bearer token or basic credentials read from the environment or
a file; 5xx answers are retried, 4xx are not; the credential never appears in any file of the run
directory nor in the log; `evalmesh push` re-reads the credential when resending."""
import base64
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import (Webhook, all_files, driver, evalmesh, report_recipe, run,
                            tempdir, write)
from checks import check, finish  # noqa: E402

TOKEN = "tok-3f9c2a7e51d84b60"
work = tempdir()
hook = Webhook()


def recipe(name, auth, required=True, retries=2):
    return report_recipe(work, name, """\
      - json
      - type: webhook
        url: %s
        required: %s
        retries: %d
        backoff_s: 0.05
        auth: %s
""" % (hook.url, "true" if required else "false", retries, auth))


def no_secret(run_dir, log_text, secret):
    for path in all_files(run_dir):
        with open(path, "rb") as f:
            check(secret.encode() not in f.read(), "credential found in " + path)
    check(secret not in log_text, "credential found in the log output")


env = {"EM_TEST_TOKEN": TOKEN}

# 1. Bearer token from the environment: body equals results.json, header carries the token.
run_dir = os.path.join(work, "run1")
rc, out, err = run([driver(), recipe("hook", "{type: bearer, env: EM_TEST_TOKEN}"), run_dir], env)
check(rc == 0, "webhook run exit %d: %s" % (rc, err))
check(len(hook.requests) == 1, "one request, got %d" % len(hook.requests))
method, path, headers, body = hook.requests[0]
check(method == "POST" and path == "/hook", "request line %s %s" % (method, path))
check(headers.get("Authorization") == "Bearer " + TOKEN, "auth header %r" % headers.get("Authorization"))
check(headers.get("Content-Type") == "application/json", "content type %r" % headers.get("Content-Type"))
with open(os.path.join(run_dir, "results.json")) as f:
    results = json.load(f)
check(json.loads(body) == results, "webhook body differs from results.json")
check(results["metrics"]["f_ref"]["token_ppl"] == {"value": 12.5, "error": 0.25}, "metric in body")
no_secret(run_dir, out + err, TOKEN)

# 2. Basic credentials from a file.
cred = write(os.path.join(work, "cred.txt"), "ci-user:pa55-w0rd-77\n")
hook.requests.clear()
run_dir = os.path.join(work, "run2")
rc, out, err = run([driver(), recipe("hook2", "{type: basic, file: %s}" % cred), run_dir])
check(rc == 0, "basic auth run exit %d: %s" % (rc, err))
want = "Basic " + base64.b64encode(b"ci-user:pa55-w0rd-77").decode()
check(hook.requests[0][2].get("Authorization") == want, "basic header %r" % hook.requests[0][2])
no_secret(run_dir, out + err, "pa55-w0rd-77")

# 3. The server fails with 500: 3 attempts, exit 4, spooled without the token; resent later.
hook.status = 500
hook.requests.clear()
run_dir = os.path.join(work, "run3")
rc, out, err = run([driver(), recipe("hook3", "{type: bearer, env: EM_TEST_TOKEN}"), run_dir], env)
check(rc == 4, "500 answers, required: exit %d: %s" % (rc, err))
check(len(hook.requests) == 3, "retried to 3 attempts, got %d" % len(hook.requests))
check("HTTP 500" in err, "status in the error: " + err)
spooled = glob.glob(os.path.join(run_dir, "push-spool", "*.json"))
check(len(spooled) == 1, "spooled: %s" % spooled)
with open(spooled[0]) as f:
    spool = json.load(f)
check(sorted(spool) == ["body", "output", "stage", "target"] and spool["target"] == "webhook",
      "spool holds no URL nor credential source: %s" % sorted(spool))
no_secret(run_dir, out + err, TOKEN)

hook.status = 200
hook.requests.clear()
rc, out, err = run([evalmesh(), "push", run_dir], {})
check(rc == 2 and "EM_TEST_TOKEN is not set" in err, "resend without the token: %d %s" % (rc, err))
check(hook.requests == [], "nothing sent without the credential")
rc, out, err = run([evalmesh(), "push", run_dir], env)
check(rc == 0, "resend: exit %d: %s %s" % (rc, out, err))
check(len(hook.requests) == 1 and hook.requests[0][2].get("Authorization") == "Bearer " + TOKEN,
      "resent with the token from the environment")
check(json.loads(hook.requests[0][3]) == json.load(open(os.path.join(run_dir, "results.json"))),
      "resent body is the results document")
no_secret(run_dir, out + err, TOKEN)

# 4. A 400 answer is not retried; not required: the run succeeds with a warning.
hook.status = 400
hook.requests.clear()
run_dir = os.path.join(work, "run4")
rc, out, err = run([driver(), recipe("hook4", "{type: bearer, env: EM_TEST_TOKEN}", False), run_dir], env)
check(rc == 0, "optional push with 400: exit %d: %s" % (rc, err))
check(len(hook.requests) == 1, "a 4xx is not retried: %d requests" % len(hook.requests))
check("HTTP 400" in err and "not required" in err, "warning: " + err)

# 5. auth needs exactly one source: exit 2 at the auth map's place.
path = recipe("hook5", "{type: bearer, env: A, file: /x}")
rc, out, err = run([driver(), path, os.path.join(work, "run5")])
check(rc == 2 and "%s:27:15: stage 'out': auth needs exactly one of" % path in err,
      "two credential sources: %d %s" % (rc, err))

hook.close()
sys.exit(finish())
