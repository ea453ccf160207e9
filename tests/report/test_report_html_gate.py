"""The HTML report shows the gate's comparison, on the issue's case of a noisy model (perplexity
111.37 -> 119.47) failing a paired `max_increase_pct: 1` gate: the verdict at the top (FAILED, the
baseline run, each check's value, baseline, difference ± error, threshold and bound, the paired
summary); the history chart with error bars, dates and short commits on its x axis, failed runs
marked, the baseline line at the baseline run's value and the threshold line between it and this
run, a far threshold noted off the chart; the per-window scatter of candidate against baseline
NLL. The results document, history and windows are built by hand and rendered by report_render
as the report stage renders them. Then headless Chromium: the DOM has the verdict and the four
charts, and a screenshot shows them (verdict, failed-point, baseline, threshold and scatter
colours). Set EVALMESH_REPORT_GATE_SCREENSHOT=path to keep the screenshot
(docs/report-gate-screenshot.png).
usage: test_report_html_gate.py REPORT_DRIVER REPORT_RENDER"""
import copy
import html.parser
import json
import os
import random
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import driver, fail, png_colours, run, skip, tempdir, write
from checks import check, check_equal, finish  # noqa: E402

if len(sys.argv) < 3:
    fail("usage: test_report_html_gate.py REPORT_DRIVER REPORT_RENDER")
render = sys.argv[2]
work = tempdir()

# A real results document from the report stage, then this run's values and gate by hand.
rc, out, err = run([driver(), write(os.path.join(work, "seed.yaml"), """\
name: nightly-regression
stages:
  m:
    kind: fixed_metrics
    values:
      fwd.token_ppl: [119.47, 1.03]
      fwd.nll_mean: [4.783, 0.0086]
      fwd.token_ppl_se: 1.03
      fwd.token_accuracy: 0.2112
      fwd.tokens: 16352
      fwd.tokens_per_second: 48000
    timing: [fwd.tokens_per_second]
    ranks: [[8176, 16, 0.17], [8176, 16, 0.171]]
    window_nll: [4.7, 4.8]
    model: /models/stories260K-noisy.gguf
    dataset: /data/wikitext-2-raw-v1.test.txt
    model_sha256: 9f2c41d07e55a3b1c0de5f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4
    model_digest: 5d0c7e21a9b34f6e8c1d2b3a4f5e6d7c
    dataset_sha256: 1ee7
  out: {kind: report, metrics: m, outputs: [json]}
"""), os.path.join(work, "seed")])
check(rc == 0, "seed run: %s" % err)
with open(os.path.join(work, "seed", "results.json")) as f:
    doc = json.load(f)
doc["start_time"], doc["end_time"] = "2026-12-02T02:30:05Z", "2026-12-02T02:31:40Z"
doc["evalmesh"]["commit"] = "b41c9e07d2aa"

BOUND = 111.37 + 111.37 * 0.01 + 2 * 0.31  # the max_increase_pct bound with tolerance_sigma 2
doc["gate"] = {
    "stage": "gate", "passed": False,
    "baseline": {"source": "runs/history/nightly.jsonl:5", "why": "last passing run of the history",
                 "end_time": "2026-12-01T02:31:12Z", "commit": "6fe370214584",
                 "model": {"path": "/models/stories260K.gguf",
                           "header_sha256": "0aa1c2f3e4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6978"},
                 "paired": True},
    "checks": [
        {"metric": "fwd.token_ppl", "rule": "max", "threshold": 200, "value": 119.47,
         "baseline": None, "comparison": "absolute", "difference": None, "difference_error": None,
         "bound": 200, "passed": True, "message": "fwd.token_ppl = 119.47 <= 200 (max 200)"},
        {"metric": "fwd.token_ppl", "rule": "max_increase_pct", "threshold": 1, "value": 119.47,
         "baseline": 111.37, "comparison": "paired", "difference": 8.1, "difference_error": 0.31,
         "bound": BOUND, "passed": False,
         "message": "fwd.token_ppl = 119.47 is not <= 113.1 (max_increase_pct 1, paired)"},
        {"metric": "fwd.nll_mean", "rule": "max_increase_sigma", "threshold": 3, "value": 4.783,
         "baseline": 4.7128, "comparison": "paired", "difference": 0.0702,
         "difference_error": 0.0026, "bound": 0.0078, "passed": False,
         "message": "fwd.nll_mean difference 0.0702 is not <= 0.0078 (max_increase_sigma 3, paired)"}],
    "paired": {"stage": "fwd", "windows": 32, "tokens": 16352, "nll_mean_difference": 0.0702,
               "nll_mean_difference_error": 0.0026, "token_accuracy_difference": -0.0121,
               "token_accuracy_difference_error": 0.0019}}
doc_path = write(os.path.join(work, "results.json"), json.dumps(doc, indent=1))

# The history: five earlier nights (the third failed its gate), then this run.
nights = [("2026-11-27T02:30:58Z", "6fe370214584", 111.03, True),
          ("2026-11-28T02:31:02Z", "6fe370214584", 111.42, True),
          ("2026-11-29T02:30:49Z", "a07d5c11e9f0", 117.9, False),
          ("2026-11-30T02:31:20Z", "6fe370214584", 111.21, True),
          ("2026-12-01T02:31:12Z", "6fe370214584", 111.37, True)]
lines = []
for end, commit, ppl, passed in nights:
    d = copy.deepcopy(doc)
    del d["ranks"]
    d["end_time"], d["evalmesh"]["commit"] = end, commit
    d["metrics"]["fwd"]["token_ppl"] = {"value": ppl, "error": 0.96}
    d["gate"] = {"stage": "gate", "passed": passed, "baseline": None, "checks": []}
    lines.append(json.dumps(d))
this = copy.deepcopy(doc)
del this["ranks"]
lines.append(json.dumps(this))
hist = write(os.path.join(work, "nightly.jsonl"), "\n".join(lines) + "\n")

# 32 windows: the noisy model is worse on most of them.
rng = random.Random(14)
base = [round(rng.gauss(4.71, 0.25), 4) for _ in range(32)]
cand = [round(b + rng.gauss(0.07, 0.03), 4) for b in base]
worse = sum(c > b for b, c in zip(base, cand))
windows = write(os.path.join(work, "windows.json"),
                json.dumps({"window_nll": cand, "baseline": base, "candidate": cand}))

page_path = os.path.join(work, "report.html")
rc, out, err = run([render, "html", doc_path, page_path, hist, "fwd.token_ppl", windows])
check(rc == 0, "report_render html: exit %d: %s" % (rc, err))
with open(page_path) as f:
    page = f.read()


class Page(html.parser.HTMLParser):
    """Elements of each chart with their attributes and text, the verdict's table rows, every
    URL the page would load."""

    def __init__(self):
        super().__init__()
        self.chart = None
        self.charts = {}
        self.loads = []
        self.rows = []
        self.in_verdict = False
        self.in_cell = False
        self.texts = []  # the chart's <text> contents: (class, text)
        self.cur = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a:
                self.loads.append(a[key])
        if tag == "section" and a.get("id") == "verdict":
            self.in_verdict = True
        if self.in_verdict and tag == "tr":
            self.rows.append([])
        if self.in_verdict and tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
            self.in_cell = True
        if tag == "svg" and a.get("class") == "chart":
            self.chart = a["id"]
            self.charts[self.chart] = []
        elif self.chart:
            self.charts[self.chart].append((tag, a, []))
            if tag == "text":
                self.cur = self.charts[self.chart][-1]

    def handle_data(self, data):
        if self.in_cell:
            self.rows[-1][-1] += data
        if self.cur is not None:
            self.cur[2].append(data)

    def handle_endtag(self, tag):
        if tag == "svg":
            self.chart = None
        if tag == "section":
            self.in_verdict = False
        if tag == "text":
            self.cur = None
        if tag in ("td", "th"):
            self.in_cell = False

    def elements(self, chart, tag, cls=None):
        return [a for t, a, _ in self.charts.get(chart, []) if t == tag and
                (cls is None or a.get("class") == cls)]

    def text_of(self, chart, cls):
        """The texts whose classes include those of cls."""
        return ["".join(txt) for t, a, txt in self.charts.get(chart, [])
                if t == "text" and set(cls.split()) <= set(a.get("class", "").split())]


p = Page()
p.feed(page)
check(p.loads == [] and "<script" not in page and "<link" not in page, "self-contained: %s" % p.loads)

# The verdict: at the top (before the provenance table and the charts), failed, with its baseline.
v = page.find('<section id="verdict" class="verdict fail">')
check(v > 0 and v < page.find("<table>") and v < page.find("<svg"), "verdict first, failed")
check("<h2>Gate 'gate': FAILED</h2>" in page, "verdict heading")
check("Baseline: runs/history/nightly.jsonl:5 (last passing run of the history), run ended "
      "2026-12-01T02:31:12Z, commit 6fe370214584, model /models/stories260K.gguf (header sha256 "
      "0aa1c2f3e4d5). Compared token by token" in page, "baseline paragraph")
check("<tr><th>model digest</th><td>5d0c7e21a9b34f6e8c1d2b3a4f5e6d7c</td></tr>" in page,
      "the run's model digest in the provenance table")
# A baseline that records its model's digest is named by it (the header's sha256 is shared by
# models that differ only in their weights).
with_digest = copy.deepcopy(doc)
with_digest["gate"]["baseline"]["model"]["digest"] = "1b2c3d4e5f60718293a4b5c6d7e8f901"
digest_doc = write(os.path.join(work, "results-digest.json"), json.dumps(with_digest))
digest_page = os.path.join(work, "report-digest.html")
rc, out, err = run([render, "html", digest_doc, digest_page, hist, "fwd.token_ppl", windows])
check(rc == 0, "report_render html (baseline digest): exit %d: %s" % (rc, err))
with open(digest_page) as f:
    check("model /models/stories260K.gguf (digest 1b2c3d4e5f60). Compared token by token"
          in f.read(), "baseline paragraph names the baseline model's digest")
check_equal(p.rows, [
    ["metric", "rule", "value", "baseline", "difference ± error", "bound", "result"],
    ["fwd.token_ppl", "max 200 (absolute)", "119.47", "—", "—", "200", "PASS"],
    ["fwd.token_ppl", "max_increase_pct 1 (paired)", "119.47", "111.37", "+8.1 ± 0.31",
     "%.6g" % BOUND, "FAIL"],
    ["fwd.nll_mean", "max_increase_sigma 3 (paired)", "4.783", "4.7128", "+0.0702 ± 0.0026",
     "0.0078", "FAIL"]], "the checks table")
check("Paired over 32 windows, 16352 tokens of stage 'fwd': mean NLL difference +0.0702 ± 0.0026 "
      "nats/token, token accuracy difference -0.0121 ± 0.0019." in page, "paired summary")
check('<li class="fail">fwd.token_ppl = 119.47 is not &lt;= 113.1 (max_increase_pct 1, paired)</li>'
      in page, "failed check's message")

# The history chart.
check_equal(sorted(p.charts), ["history", "nll", "paired", "throughput"], "charts")
points = p.elements("history", "circle", "point") + p.elements("history", "circle", "point failed")
failed_points = p.elements("history", "circle", "point failed")
check_equal(len(points), 6, "history points")
check_equal(len(failed_points), 2, "failed runs marked (night 3 and this run)")
check_equal(len(p.elements("history", "path", "errbar")), 6, "an error bar per run")
check_equal(p.text_of("history", "xlab date"),
            ["11-27 02:30", "11-28 02:31", "11-29 02:30", "11-30 02:31", "12-01 02:31",
             "12-02 02:31"], "dates on the x axis")
check_equal(p.text_of("history", "xlab commit"),
            ["6fe3702", "6fe3702", "a07d5c1", "6fe3702", "6fe3702", "b41c9e0"], "short commits")
by_x = sorted(points, key=lambda a: float(a["cx"]))
y_of = [float(a["cy"]) for a in by_x]
baseline = p.elements("history", "line", "baseline")
threshold = p.elements("history", "line", "threshold")
check(len(baseline) == 1 and baseline[0]["y1"] == by_x[4]["cy"],
      "the baseline line is at the baseline run's value (run 5): %s %s" % (baseline, by_x[4]))
check(len(threshold) == 1 and y_of[5] < float(threshold[0]["y1"]) < float(baseline[0]["y1"]),
      "one threshold line (the 1%% bound) between the baseline and this run: %s" % threshold)
check("max 200 &rarr; bound 200 (off the chart)" in page, "the far threshold is noted, not drawn")
check("threshold: max_increase_pct 1 &rarr; bound %.6g<" % BOUND in page or
      "threshold: max_increase_pct 1 &rarr; bound %.6g (" % BOUND in page, "threshold legend")
check("run 6: 119.47 ± 1.03, 2026-12-02T02:31:40Z, commit b41c9e07d2aa, gate failed" in page,
      "point title")

# The paired scatter: one point per window, the diagonal, how many windows got worse.
pts = p.elements("paired", "circle", "pwin")
check_equal(len(pts), 32, "one point per paired window")
check_equal(len(p.elements("paired", "line", "diag")), 1, "the diagonal")
check("this run is worse in %d of 32 windows" % worse in page, "worse windows: %d" % worse)
above = sum(float(a["cy"]) < 220 - (float(a["cx"]) - 70) * 200 / 550 for a in pts)
check_equal(above, worse, "points above the diagonal are the windows that got worse")
check("window 0: baseline %.6g, this run %.6g" % (base[0], cand[0]) in page, "window title")

chromium = shutil.which("chromium")
if not chromium:
    skip("chromium is not installed (apt-get install chromium) — the SVG checks above passed")
url = "file://" + page_path
flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
rc, dom, err = run([chromium] + flags + ["--dump-dom", url], timeout=120)
check(rc == 0, "chromium --dump-dom exit %d: %s" % (rc, err[-2000:]))
check(dom.count('<svg class="chart"') == 4 and 'id="verdict"' in dom, "chromium's DOM: verdict, 4 charts")
check(dom.count('class="pwin"') == 32, "scatter points in the DOM")

shot = os.path.join(work, "report.png")
rc, out, err = run([chromium] + flags + ["--hide-scrollbars", "--window-size=760,2300",
                                         "--screenshot=" + shot, url], timeout=120)
check(rc == 0 and os.path.exists(shot), "chromium --screenshot exit %d: %s" % (rc, err[-2000:]))
colours = png_colours(shot)
for name, rgb, least in (("failed verdict background", (0xfb, 0xe9, 0xe7), 5000),
                         ("failed verdict border and threshold", (0xc0, 0x39, 0x2b), 500),
                         ("history line", (0x3a, 0x9d, 0x5d), 100),
                         ("baseline line", (0x1f, 0x5f, 0xa8), 50),
                         ("scatter points", (0x8e, 0x44, 0xad), 50)):
    check(colours.get(rgb, 0) >= least, "%s colour %s drawn: %d pixels" % (name, rgb,
                                                                           colours.get(rgb, 0)))
keep = os.environ.get("EVALMESH_REPORT_GATE_SCREENSHOT")
if keep:
    shutil.copy(shot, keep)
sys.exit(finish())
