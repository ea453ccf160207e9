"""The example alert rules (docs/prometheus-alerts.yml) are valid (`promtool check rules`) and do
what docs/scheduled-regression.md says (`promtool test rules` on prometheus-alerts.test.yml: the
no-success alert fires 2 days after the last passing run, once per recipe across a model change,
and not while the gate's failing push has removed the gauge; the gate alerts fire on a failed
gate). Skipped when promtool (Debian package prometheus) is not installed."""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import run, skip
from checks import check, finish  # noqa: E402

promtool = shutil.which("promtool")
if not promtool:
    skip("promtool is not installed (apt-get install prometheus)")
here = os.path.dirname(os.path.abspath(__file__))
rules = os.path.join(here, "..", "..", "docs", "prometheus-alerts.yml")
rc, out, err = run([promtool, "check", "rules", rules])
check(rc == 0 and "SUCCESS: 4 rules found" in out, "promtool check rules: %d %s %s" % (rc, out, err))
rc, out, err = run([promtool, "test", "rules", os.path.join(here, "prometheus-alerts.test.yml")])
check(rc == 0 and "SUCCESS" in out, "promtool test rules: %d\n%s\n%s" % (rc, out, err))
sys.exit(finish())
