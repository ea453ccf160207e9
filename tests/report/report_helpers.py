"""Helpers for the report tests: a Prometheus Pushgateway started on a free loopback port, a
loopback HTTP server that records webhook requests, and running the report driver or evalmesh."""
import atexit
import calendar
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, failed, finish  # noqa: E402

PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"


_temp_dirs = []


def fail(msg):
    """A failure the script cannot go on after (the test setup itself failed)."""
    check(False, msg)
    sys.exit(finish())


def skip(msg):
    print("SKIPPED:", msg)
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pushgateway:
    """The real Debian pushgateway on 127.0.0.1:port with its own persistence file."""

    def __init__(self, workdir, port=None):
        if not os.access(PUSHGATEWAY, os.X_OK):
            skip(PUSHGATEWAY + " is not installed")
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.persistence = os.path.join(workdir, "pushgateway.data")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [PUSHGATEWAY, "--web.listen-address=127.0.0.1:%d" % self.port,
             "--persistence.file=" + self.persistence, "--persistence.interval=1s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        fail("pushgateway did not become ready on " + self.url)

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def groups(self):
        """GET /api/v1/metrics: one entry per pushed group."""
        with urllib.request.urlopen(self.url + "/api/v1/metrics", timeout=5) as r:
            doc = json.load(r)
        check(doc["status"] == "success", "pushgateway API status " + str(doc))
        return doc["data"]


def samples(group):
    """{(metric name, frozenset of sample labels minus the grouping ones): float value}"""
    out = {}
    grouping = set(group["labels"])
    for name, fam in group.items():
        if name in ("labels", "last_push_successful") or not isinstance(fam, dict):
            continue
        if "metrics" not in fam:
            continue
        for m in fam["metrics"]:
            # the gateway adds an empty `instance` label to every sample it stores
            labels = frozenset((k, v) for k, v in m["labels"].items()
                               if k not in grouping and (k, v) != ("instance", ""))
            out[(name, labels)] = float(m["value"])
    return out


def run_labels(results):
    """The provenance labels every pushed series carries, from a results document."""
    out = {}
    for label, obj, key in (("model", "model", "path"), ("model_digest", "model", "digest"),
                            ("model_sha256", "model", "header_sha256"),
                            ("dataset", "dataset", "path"), ("commit", "evalmesh", "commit")):
        if results[obj].get(key) is not None:
            out[label] = results[obj][key]
    return out


def series(results, own):
    """The label set of a pushed series: its own labels (a dict) and the run's (see samples)."""
    labels = dict(run_labels(results))
    labels.update(own)
    return frozenset(labels.items())


def expected_series(results):
    """Every series a push of this results document must hold, computed independently of the C
    code: {(name, label set): value}. Each metric with its _stderr (an aggregate's `<metric>_se`
    twin left out), each rank's throughput, the gate gauges of a `gate` section (null quantities
    left out), and the last success (the end time) when there is no gate or it passed."""
    want = {}
    for stage, metrics in results["metrics"].items():
        for name, m in metrics.items():
            if name.endswith("_se") and "error" in metrics.get(name[:-3], {}):
                continue
            want[("evalmesh_" + name, series(results, {"stage": stage}))] = m["value"]
            if "error" in m:
                want[("evalmesh_" + name + "_stderr", series(results, {"stage": stage}))] = \
                    m["error"]
    for r in results.get("ranks", []):
        want[("evalmesh_rank_tokens_per_second", series(results, {"rank": str(r["rank"])}))] = \
            r["tokens_per_second"]
    gate = results.get("gate")
    if gate is not None:
        want[("evalmesh_gate_passed", series(results, {"gate": gate["stage"]}))] = \
            1.0 if gate["passed"] else 0.0
        for c in gate["checks"]:
            own = {"gate": gate["stage"], "metric": c["metric"], "rule": c["rule"],
                   "comparison": c["comparison"]}
            for key, gauge in (("value", "value"), ("baseline", "baseline"),
                               ("threshold", "threshold"), ("bound", "bound"),
                               ("difference", "difference"),
                               ("difference_error", "difference_stderr")):
                if c.get(key) is not None:
                    want[("evalmesh_gate_check_" + gauge, series(results, own))] = c[key]
            want[("evalmesh_gate_check_passed", series(results, own))] = \
                1.0 if c["passed"] else 0.0
    if gate is None or gate["passed"] is True:
        end = calendar.timegm(time.strptime(results["end_time"], "%Y-%m-%dT%H:%M:%SZ"))
        want[("evalmesh_last_success_timestamp_seconds", series(results, {}))] = float(end)
    return want


class Webhook:
    """A loopback HTTP server recording each request (method, path, headers, body)."""

    def __init__(self, status=200, tls=None):
        """tls: (certificate file, key file) to serve HTTPS instead of HTTP."""
        self.requests = []
        self.status = status
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                hook.requests.append((self.command, self.path, dict(self.headers), body))
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok\n")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls:
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = "%s://127.0.0.1:%d/hook" % (scheme, self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def driver():
    if len(sys.argv) < 2:
        fail("usage: test.py REPORT_DRIVER")
    return sys.argv[1]


def evalmesh():
    return os.environ.get("EVALMESH_BIN", "evalmesh")


def run(cmd, env=None, timeout=120):
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def _remove_temp_dirs():
    if failed():
        print("(kept for a look: %s)" % " ".join(_temp_dirs))
        return
    for d in _temp_dirs:
        shutil.rmtree(d, ignore_errors=True)


def tempdir():
    """A fresh folder, removed at exit unless a check failed."""
    if not _temp_dirs:
        atexit.register(_remove_temp_dirs)
    d = tempfile.mkdtemp(prefix="em-report-")
    _temp_dirs.append(d)
    return d


def all_files(folder):
    for root, _, files in os.walk(folder):
        for f in files:
            yield os.path.join(root, f)


# The metrics every driver recipe reports: known exactly.
FIXED_METRICS = """\
  m:
    kind: fixed_metrics
    values:
      f_ref.token_ppl: [12.5, 0.25]
      f_ref.bits_per_byte: 0.3333333333333333
      f_q4.token_ppl: [13.0, 0.5]
      f_ref.tokens_per_second: 1000
    timing: [f_ref.tokens_per_second]
    ranks: [[600, 3, 2.0], [400, 1, 0.5]]
    window_nll: [2.0, 2.5, 3.0, 2.25]
    model: models/tiny.gguf
    dataset: data/wiki.test.raw
    model_sha256: ab12
    dataset_sha256: cd34
"""


def report_recipe(folder, name, outputs, more=""):
    """Writes folder/NAME.yaml: the FIXED_METRICS stage `m`, then a report stage `out` whose
    `outputs:` list is the given lines (each indented six spaces), then `more` (further stages);
    returns its path. The report stage's `kind:` is on line 18 and its first output on line 21."""
    return write(os.path.join(folder, name + ".yaml"), """\
name: %s
stages:
%s  out:
    kind: report
    metrics: m
    outputs:
%s%s""" % (name, FIXED_METRICS, outputs, more))


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA PNG: (width, height, rows of (r, g, b) tuples)."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "a PNG file")
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", chunk[:10])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    check(depth == 8 and color in (2, 6), "8-bit RGB(A) PNG, got depth %d color %d" % (depth, color))
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def png_colours(path):
    """{(r, g, b): pixel count} of a screenshot."""
    w, h, rows = png_pixels(path)
    colours = {}
    for row in rows:
        for px in row:
            colours[px] = colours.get(px, 0) + 1
    return colours
