"""The HTML report: one self-contained file whose charts (per-rank throughput bars, per-window NLL
histogram, history line) are inline SVG with the expected elements; it opens in headless
Chromium, and a screenshot shows the charts (the bar, bin and line colours are on screen).
Set EVALMESH_REPORT_SCREENSHOT=path to keep the screenshot (docs/report-screenshot.png)."""
import html.parser
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import FIXED_METRICS, driver, png_colours, run, skip, tempdir, write
from checks import check, finish  # noqa: E402

work = tempdir()
hist = os.path.join(work, "history.jsonl")

# Two earlier runs in the history, then this run appends the third.
rc, out, err = run([driver(), write(os.path.join(work, "seed.yaml"), """\
name: nightly
stages:
%s  out: {kind: report, metrics: m, outputs: [json]}
""" % FIXED_METRICS), os.path.join(work, "seed")])
check(rc == 0, "seed run: %s" % err)
with open(os.path.join(work, "seed", "results.json")) as f:
    doc = json.load(f)
del doc["ranks"]
lines = []
for v in (12.9, 12.7):
    doc["metrics"]["f_ref"]["token_ppl"]["value"] = v
    lines.append(json.dumps(doc))
write(hist, "\n".join(lines) + "\n")

run_dir = os.path.join(work, "run")
rc, out, err = run([driver(), write(os.path.join(work, "r.yaml"), """\
name: nightly
stages:
%s  out:
    kind: report
    metrics: m
    outputs: [json, {type: history, path: %s}, {type: html, metric: f_ref.token_ppl}]
""" % (FIXED_METRICS, hist)), run_dir])
check(rc == 0, "html run: exit %d: %s" % (rc, err))
page_path = os.path.join(run_dir, "report.html")
with open(page_path) as f:
    page = f.read()


class Charts(html.parser.HTMLParser):
    """Counts the elements of each <svg class="chart">, and every URL the page would load."""

    def __init__(self):
        super().__init__()
        self.current = None
        self.charts = {}
        self.loads = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a:
                self.loads.append(a[key])
        if tag == "svg" and a.get("class") == "chart":
            self.current = a["id"]
            self.charts[self.current] = {}
        elif self.current:
            name = tag + "." + a.get("class", "")
            self.charts[self.current][name] = self.charts[self.current].get(name, 0) + 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.current = None


p = Charts()
p.feed(page)
check(sorted(p.charts) == ["history", "nll", "throughput"], "charts: %s" % sorted(p.charts))
check(p.charts["throughput"].get("rect.bar") == 2, "one bar per rank: %s" % p.charts["throughput"])
check(p.charts["nll"].get("rect.bin") == 2, "2 histogram bins for 4 windows: %s" % p.charts["nll"])
check(p.charts["history"].get("circle.point") == 3 and p.charts["history"].get("polyline.line") == 1,
      "3 history points: %s" % p.charts["history"])
# f_ref.token_ppl has an error (0.25) in every run: an error bar each; no gate: no reference lines
# and no verdict; each run's date and short commit under the axis (the last anchored at its end).
check(p.charts["history"].get("path.errbar") == 3, "3 error bars: %s" % p.charts["history"])
check(p.charts["history"].get("text.xlab date") == 2 and
      p.charts["history"].get("text.xlab date end") == 1 and
      p.charts["history"].get("text.xlab commit") == 2 and
      p.charts["history"].get("text.xlab commit end") == 1, "x labels: %s" % p.charts["history"])
check("line.baseline" not in p.charts["history"] and "line.threshold" not in p.charts["history"]
      and 'id="verdict"' not in page, "no gate, no verdict or reference lines")
commit = doc["evalmesh"]["commit"][:7]
check(len(re.findall(r'class="xlab commit( end)?" x="[0-9.]+" y="246">%s</text>' % commit, page))
      == 3, "short commits on the x axis")
check(p.loads == [] and "<script" not in page and "<link" not in page, "self-contained: %s" % p.loads)
check("rank 1: 800 tokens/s" in page and "run 3: 12.5" in page, "chart values")

chromium = shutil.which("chromium")
if not chromium:
    skip("chromium is not installed (apt-get install chromium) — the SVG checks above passed")

url = "file://" + page_path
flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
rc, dom, err = run([chromium] + flags + ["--dump-dom", url], timeout=120)
check(rc == 0, "chromium --dump-dom exit %d: %s" % (rc, err[-2000:]))
check(dom.count('<svg class="chart"') == 3, "chromium's DOM has the 3 charts")
check(dom.count('class="bar"') == 2 and dom.count('class="bin"') == 2, "chart elements in the DOM")

shot = os.path.join(work, "report.png")
rc, out, err = run([chromium] + flags + ["--hide-scrollbars", "--window-size=760,1500",
                                         "--screenshot=" + shot, url], timeout=120)
check(rc == 0 and os.path.exists(shot), "chromium --screenshot exit %d: %s" % (rc, err[-2000:]))


colours = png_colours(shot)
check(len(colours) > 20, "the screenshot is not blank: %d colours" % len(colours))
for name, rgb in (("bar", (0x4a, 0x7e, 0xbb)), ("bin", (0xd0, 0x8a, 0x3a)), ("line", (0x3a, 0x9d, 0x5d))):
    check(colours.get(rgb, 0) > 100, "%s colour %s drawn: %d pixels" % (name, rgb, colours.get(rgb, 0)))
keep = os.environ.get("EVALMESH_REPORT_SCREENSHOT")
if keep:
    shutil.copy(shot, keep)
sys.exit(finish())
