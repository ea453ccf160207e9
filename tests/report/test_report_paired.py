"""Paired gates end to end (issue 14): recipes/nightly_regression.yaml through `evalmesh run` on
stories260K and the first 32 chunks of WikiText-2 (n_ctx 512), with the test's own history and
an unreachable Pushgateway (not required):
  (a) a copy of the model with Gaussian noise added to its weights (PPL +3..7%) fails
      `max_increase_pct: 1` with the paired rule, while the old unpaired rule with
      tolerance_sigma 2 passes it (computed here, and by the gate given a baseline without
      per-token scores, which says so in its message);
  (b) the failed run is recorded (gate passed false, no token file) but never becomes the
      baseline: the next runs compare against the last passing one;
  (c) the paired mean difference and standard error equal NumPy's from both runs' per-token
      window records (<run_dir>/records/fwd.rank0.*.bin);
  (d) a candidate identical to its baseline differs by exactly 0 and passes; against a pinned
      baseline whose token file has one NLL raised by 0.125, the mean difference is exactly
      -0.125 / N;
  (e) another n_ctx, another dataset file or another forward precision: refused (exit 2) naming
      the difference (results.json records the precision);
      `unpaired: allow` compares unpaired and says why;
  (f) `evalmesh history` and `evalmesh history --baseline`.
usage: test_report_paired.py"""
import hashlib
import json
import os
import re
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from report_helpers import evalmesh, free_port, run, skip, tempdir, write
from checks import check, finish  # noqa: E402
from gguf_package import require_gguf  # noqa: E402

shared = os.environ.get("EVALMESH_SHARED_DATA", "")
model = os.path.join(shared, "models", "stories260K.gguf")
wiki = os.path.join(shared, "text", "wikitext-2-raw-v1.test.txt")
stories = os.path.join(shared, "text", "tinystories_sample.txt")
if not all(os.path.exists(p) for p in (model, wiki, stories)):
    skip("needs %s (stories260K.gguf, WikiText-2, the TinyStories sample)" % shared)
require_gguf()
import gguf  # noqa: E402
import numpy as np  # noqa: E402

source = os.environ["EVALMESH_SOURCE_DIR"]
work = tempdir()
history = os.path.join(work, "hist", "nightly.jsonl")


def noisy_copy(path, scale, seed):
    """A copy of the model with N(0, (scale * std(w))^2) added to every weight but the norms."""
    shutil.copyfile(model, path)
    reader = gguf.GGUFReader(path, "r+")
    rng = np.random.default_rng(seed)
    for t in reader.tensors:
        if t.name.endswith("norm.weight"):
            continue
        check(t.tensor_type == gguf.GGMLQuantizationType.F32, "%s is F32" % t.name)
        t.data[...] += (scale * float(np.std(t.data)) *
                        rng.standard_normal(t.data.shape)).astype(np.float32)
    reader.data.flush()
    return path


noisy = noisy_copy(os.path.join(work, "noisy.gguf"), 0.05, 7)

with open(os.path.join(source, "recipes", "nightly_regression.yaml")) as f:
    shipped = f.read()
recipe = shipped
for old, new in ((r"path: \S*stories260K.gguf", "path: " + model),
                 (r"path: \S*wikitext-2-raw-v1.test.txt", "path: " + wiki),
                 (r"url: http://127.0.0.1:9091", "url: http://127.0.0.1:%d" % free_port()),
                 (r"retries: 3", "retries: 0"),
                 (r"\S*runs/history/nightly.jsonl", history)):
    recipe, n = re.subn(old, new, recipe)
    check(n >= 1, "the shipped recipe has %r" % old)
recipe = write(os.path.join(work, "nightly.yaml"), recipe)


def nightly(name, *overrides):
    run_dir = os.path.join(work, name)
    rc, out, err = run([evalmesh(), "run", recipe, "--run-dir", run_dir] + list(overrides),
                       timeout=600)
    doc = None
    if os.path.exists(os.path.join(run_dir, "results.json")):
        with open(os.path.join(run_dir, "results.json")) as f:
            doc = json.load(f)
    return rc, out, err, run_dir, doc


def lines():
    with open(history) as f:
        return [json.loads(l) for l in f if l.strip()]


def check_of(doc, metric, rule):
    found = [c for c in doc["gate"]["checks"] if c["metric"] == metric and c["rule"] == rule]
    check(len(found) == 1, "one %s %s check in %s" % (metric, rule, doc.get("gate")))
    return found[0] if found else {}


def records(run_dir):
    """The per-token NLLs of fwd's window records, in window order (a NumPy reader of the format
    in stages/metrics/window_records.h)."""
    by_window = {}
    folder = os.path.join(run_dir, "records")
    for name in sorted(os.listdir(folder)):
        if not name.startswith("fwd.rank"):
            continue
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        check(data[:8] == b"EMWREC02" and data[200:216].rstrip(b"\0") == b"exact",
              "records header of " + name)
        at = 224
        while at < len(data):
            magic, size, _crc = struct.unpack_from("<III", data, at)
            check(magic == 0x52574D45, "record magic at %d of %s" % (at, name))
            p = at + 12
            window, n = struct.unpack_from("<qi", data, p)
            nll = np.frombuffer(data, dtype="<f8", count=n, offset=p + 40 + 8 * n)
            by_window.setdefault(window, nll)
            at = p + size
    return np.concatenate([by_window[w] for w in sorted(by_window)])


# 1. The first run of the series: no baseline yet; its per-token scores are kept beside the
#    history.
rc, out, err, run1, r1 = nightly("run1")
check(rc == 0, "first run: exit %d: %s" % (rc, err))
check("has no run yet: relative checks skipped" in err, "first run warning: " + err)
check(r1["gate"]["passed"] is True and r1["gate"]["baseline"] is None, "run 1 gate %s" % r1["gate"])
h = lines()
tokens = os.path.join(os.path.dirname(history), h[0]["tokens"]["file"])
with open(tokens, "rb") as f:
    check(hashlib.sha256(f.read()).hexdigest() == h[0]["tokens"]["sha256"],
          "the history line names its token file with its sha256")
check(h[0]["tokens"]["windows"]["protocol"] == "chunked" and
      h[0]["tokens"]["windows"]["n_ctx"] == "512", "window options %s" % h[0]["tokens"])

# 2. (a) The noisy model: +3..7% perplexity fails the 1% gate, paired.
rc, out, err, run2, r2 = nightly("run2", "stages.model.path=" + noisy)
base_ppl = r1["metrics"]["fwd"]["token_ppl"]
ppl = r2["metrics"]["fwd"]["token_ppl"]
rise = ppl["value"] / base_ppl["value"] - 1
check(0.03 < rise < 0.07, "noise raises the perplexity by 3..7%%: %+.2f%%" % (100 * rise))
check(rc == 3, "noisy model: exit %d (want 3): %s" % (rc, err))
c = check_of(r2, "fwd.token_ppl", "max_increase_pct")
check(c.get("comparison") == "paired" and c.get("passed") is False, "paired check %s" % c)
want = "fwd.token_ppl = %.8g is not <= %.8g (max_increase_pct 1, paired)" % (ppl["value"],
                                                                             c["bound"])
check(want in err, "gate message %r in %s" % (want, err))
check(r2["gate"]["passed"] is False and r2["gate"]["baseline"]["source"] == history + ":1" and
      r2["gate"]["baseline"]["paired"] is True and
      r2["gate"]["baseline"]["why"] == "last passing run of the history",
      "run 2 baseline %s" % r2["gate"]["baseline"])
check(c["value"] == ppl["value"] and c["baseline"] == base_ppl["value"] and
      c["difference"] == ppl["value"] - base_ppl["value"], "check numbers %s" % c)
# the old rule: 1% plus 2 standard errors of two independent runs
old_bound = base_ppl["value"] * 1.01 + 2 * (ppl["error"] ** 2 + base_ppl["error"] ** 2) ** 0.5
check(ppl["value"] <= old_bound, "the unpaired rule would pass: %.4f <= %.4f" %
      (ppl["value"], old_bound))
check(c["bound"] < ppl["value"] < old_bound, "paired bound %.4f < %.4f" % (c["bound"], old_bound))
print("noisy model: PPL %.4f -> %.4f (%+.2f%%); paired bound %.4f (error %.4f), unpaired %.4f" %
      (base_ppl["value"], ppl["value"], 100 * rise, c["bound"], c["difference_error"], old_bound))

# ... and the same gate with a baseline that kept only aggregates passes it, saying why.
agg_only = dict(r1)
del agg_only["tokens"]
agg_only = write(os.path.join(work, "aggregates-only.json"), json.dumps(agg_only))
rc, out, err, _, r2u = nightly("run2u", "stages.model.path=" + noisy,
                               "~stages.gate.baseline_history", "stages.gate.baseline=" + agg_only,
                               "stages.out.outputs=[table, json]")
check(rc == 0, "unpaired (aggregates-only baseline): exit %d: %s" % (rc, err))
cu = check_of(r2u, "fwd.token_ppl", "max_increase_pct")
check(cu.get("comparison") == "unpaired" and abs(cu["bound"] - old_bound) < 1e-9 * old_bound,
      "unpaired bound %s vs %.6f" % (cu, old_bound))
check(cu["message"].endswith("(max_increase_pct 1, unpaired: the baseline %s kept no per-token "
                             "scores)" % agg_only), "unpaired message: " + cu["message"])

# 3. (c) The paired statistics against NumPy from both runs' window records.
d = records(run2) - records(run1)
n = len(d)
check(n == r1["metrics"]["fwd"]["tokens"]["value"] == r2["gate"]["paired"]["tokens"],
      "token counts %d %s" % (n, r2["gate"]["paired"]))
mean = float(np.mean(d))
se = float(np.sqrt((np.mean(d * d) - mean * mean) / (n - 1)))
p = r2["gate"]["paired"]
check(abs(p["nll_mean_difference"] - mean) < 1e-12, "mean %r vs NumPy %r" %
      (p["nll_mean_difference"], mean))
check(abs(p["nll_mean_difference_error"] / se - 1) < 1e-9, "paired error %r vs NumPy %r" %
      (p["nll_mean_difference_error"], se))
check(abs(c["difference_error"] / (ppl["value"] * se) - 1) < 1e-9,
      "token_ppl's paired error = value * se: %r vs %r" % (c["difference_error"], ppl["value"] * se))
unpaired_se = (ppl["error"] ** 2 + base_ppl["error"] ** 2) ** 0.5
check(c["difference_error"] < unpaired_se / 3, "paired error %.4f well below unpaired %.4f" %
      (c["difference_error"], unpaired_se))
s = r2["gate"]["checks"]
check(any(x["rule"] == "max" and x["comparison"] == "absolute" and x["difference"] is None
          for x in s), "the ceiling is an absolute check: %s" % s)

# 4. (b) + (d) The original model again: compared with line 1 (not the failed line 2), exactly
#    equal, passes; the failed line kept no token file.
rc, out, err, run3, r3 = nightly("run3")
check(rc == 0, "identical run: exit %d: %s" % (rc, err))
check(r3["gate"]["baseline"]["source"] == history + ":1", "baseline is line 1, not the failed "
      "line 2: %s" % r3["gate"]["baseline"])
c3 = check_of(r3, "fwd.token_ppl", "max_increase_pct")
check(c3["difference"] == 0.0 and c3["difference_error"] == 0.0 and c3["passed"],
      "identical: difference exactly 0: %s" % c3)
check(r3["gate"]["paired"]["nll_mean_difference"] == 0.0 and
      r3["gate"]["paired"]["nll_mean_difference_error"] == 0.0, "paired %s" % r3["gate"]["paired"])
# the real report draws one scatter point per paired window (32 windows of the nightly slice)
with open(os.path.join(run3, "report.html")) as f:
    page = f.read()
check('id="paired"' in page and page.count('class="pwin"') == r3["gate"]["paired"]["windows"],
      "report.html has the paired scatter, one point per window (%d points)" %
      page.count('class="pwin"'))
h = lines()
check([x["gate"]["passed"] for x in h] == [True, False, True], "verdicts in the history")
check("tokens" not in h[1] and "tokens" in h[2], "a failed run keeps no token file")
# the noisy model again fails against line 3, the last passing run
rc, out, err, run4, r4 = nightly("run4", "stages.model.path=" + noisy)
check(rc == 3 and r4["gate"]["baseline"]["source"] == history + ":3",
      "run 4 against line 3: %d %s" % (rc, r4["gate"]["baseline"]))

# One token's NLL raised by 0.125 in a pinned baseline (run 1's directory, copied): the paired
# mean difference is exactly -0.125 / N.
pinned = os.path.join(work, "pinned")
shutil.copytree(run1, pinned)
tok_path = os.path.join(pinned, r1["tokens"]["file"])
with open(tok_path, "rb") as f:
    data = bytearray(f.read())
head_end = data.index(b"\n", 9) + 1
head = json.loads(data[9:head_end])
w, t = head["window_count"], head["token_count"]
nll_at = head_end + 4 * w + 4 * t + t
nll = np.frombuffer(bytes(data[nll_at:nll_at + 8 * t]), dtype="<f8").copy()
k = int(np.argmax((nll >= 4) & (nll < 7.5)))
nll[k] += 0.125
data[nll_at:nll_at + 8 * t] = nll.astype("<f8").tobytes()
with open(tok_path, "wb") as f:
    f.write(data)
pinned_doc = dict(r1)
pinned_doc["tokens"] = dict(r1["tokens"], sha256=hashlib.sha256(bytes(data)).hexdigest())
write(os.path.join(pinned, "results.json"), json.dumps(pinned_doc))
rc, out, err, _, r5 = nightly("run5", "~stages.gate.baseline_history",
                              "stages.gate.baseline={pin: %s}" % pinned,
                              "stages.out.outputs=[json]")
check(rc == 0, "pinned: exit %d: %s" % (rc, err))
check(r5["gate"]["baseline"]["source"] == pinned and r5["gate"]["baseline"]["why"] == "pinned" and
      r5["gate"]["baseline"]["paired"] is True, "pinned baseline %s" % r5["gate"]["baseline"])
check(r5["gate"]["paired"]["nll_mean_difference"] == -0.125 / t,
      "one token changed by 0.125: %r == %r" % (r5["gate"]["paired"]["nll_mean_difference"],
                                                 -0.125 / t))
# a token file that does not match its recorded sha256 is not used: unpaired, saying why
with open(tok_path, "ab") as f:
    f.write(b"x")
rc, out, err, _, r6 = nightly("run6", "~stages.gate.baseline_history",
                              "stages.gate.baseline={pin: %s}" % pinned,
                              "stages.out.outputs=[json]")
c6 = check_of(r6, "fwd.token_ppl", "max_increase_pct")
check(rc == 0 and c6["comparison"] == "unpaired" and "not %s as recorded" %
      pinned_doc["tokens"]["sha256"] in c6["message"], "tampered token file: %d %s" %
      (rc, c6.get("message")))

# 5. (f) The history: verdicts, what each gate compared against, the next baseline and why.
rc, out, err = run([evalmesh(), "history", history, "--metric", "fwd.token_ppl"])
check(rc == 0, "history: %d %s" % (rc, err))
runs = [l.split() for l in out[:out.index("fwd.token_ppl (")].splitlines()
        if l.strip()[:1].isdigit()]
check([r[4] for r in runs] == ["passed", "failed", "passed", "failed"], "verdicts %s" % runs)
check([" ".join(r[5:8]) for r in runs[1:]] == ["line 1, paired", "line 1, paired",
                                               "line 3, paired"], "their baselines %s" % runs)
check(r1["model"]["precision"] == "exact", "results.json: precision %s" % r1["model"])
check(runs[1][8] == noisy and runs[0][6] == r1["model"]["path"] and
      runs[0][7] == "(%s)" % r1["model"]["digest"][:12], "models %s" % runs)
check(runs[2][-1] == "baseline" and "<- next baseline" in out, "next baseline marked: " + out)
check("the next gate reading it compares against line 3" in out, "summary: " + out)
rc, out, err = run([evalmesh(), "history", history, "--baseline"])
check(rc == 0 and out.startswith("baseline: %s:3\n" % history), "--baseline: %d %s" % (rc, out))
check("  verdict   passed\n" in out and "(per-token scores: the gate pairs token by token)" in out,
      "--baseline details: " + out)
check(out.endswith("why: the last run whose gate passed or that had no gate; the 1 run after it "
                   "failed its gate and cannot be a baseline\n"), "--baseline why: " + out)

# 6. (e) Other windows: refused with the difference named, or unpaired when allowed.
rc, out, err, _, doc = nightly("ctx256", "stages.wiki.n_ctx=256")
check(rc == 2, "another n_ctx: exit %d (want 2): %s" % (rc, err))
check("refusing to compare with the baseline %s:3: the dataset's n_ctx is 512 in the baseline, "
      "256 in this run" % history in err, "refusal names the difference: " + err)
check(len(lines()) == 4, "a refused run appends nothing")
rc, out, err, _, doc = nightly("stories", "stages.wiki.path=" + stories,
                               "stages.wiki.max_windows=4")
check(rc == 2 and "the dataset file differs (sha256 " in err, "another dataset: %d %s" % (rc, err))
rc, out, err, _, doc = nightly("ggml", "stages.fwd.precision=ggml")
check(rc == 2 and "refusing to compare with the baseline %s:3: the precision differs (exact in "
      "the baseline, ggml in this run)" % history in err, "another precision: %d %s" % (rc, err))
check(re.search(r"forward fwd: .*, precision ggml, kernel (amx|avx512vnni|avxvnni|avx2|c)\)", err),
      "the forward's log line names the precision and its kernel: " + err)
rc, out, err, _, doc = nightly("ctx256u", "stages.wiki.n_ctx=256", "stages.gate.unpaired=allow",
                               "stages.out.outputs=[json]")
cx = check_of(doc, "fwd.token_ppl", "max_increase_pct") if doc else {}
check(rc in (0, 3) and cx.get("comparison") == "unpaired" and
      "unpaired: the windows differ: the dataset's n_ctx is 512 in the baseline, 256 in this run "
      "(unpaired: allow))" in cx.get("message", ""), "unpaired allowed: %d %s" % (rc, cx))
check(doc and doc["gate"]["baseline"]["paired"] is False, "baseline not paired")

sys.exit(finish())
