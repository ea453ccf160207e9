"""`evalmesh history FILE [--metric M]`: the series with the change against the previous and the
best run (checked against numbers computed here), a corrupt line reported with its line number
while the other lines are used, and the bad-input exits."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import evalmesh, run, tempdir, write
from checks import check, finish  # noqa: E402

work = tempdir()


def series_rows(out):
    """The rows of the metric series (after the table of runs), split in columns."""
    series = out[out.index("(lower is better") if "(lower is better" in out else 0:]
    return [l.split() for l in series.splitlines() if l.strip() and l.split()[0].isdigit()]


def entry(ppl, acc, commit):
    return json.dumps({"schema": "evalmesh.results/1", "recipe": {"name": "n", "sha256": None},
                       "evalmesh": {"version": "0.1.0", "commit": commit},
                       "end_time": "2026-12-0%dT02:00:00Z" % len(commit),
                       "metrics": {"f": {"token_ppl": {"value": ppl, "error": 0.1},
                                         "token_accuracy": {"value": acc}}}})


hist = write(os.path.join(work, "h.jsonl"), "\n".join([
    entry(10.0, 0.40, "a"), entry(9.5, 0.42, "bb"), "{broken", entry(9.8, 0.41, "ccc")]) + "\n")

rc, out, err = run([evalmesh(), "history", hist, "--metric", "f.token_ppl"])
check(rc == 0, "history exit %d: %s" % (rc, err))
check("%s:3: not a results document (not valid JSON) (line skipped)" % hist in err, "corrupt line: " + err)
check("1 corrupt line of %s skipped" % hist in err, "summary: " + err)
rows = series_rows(out)
check([r[0] for r in rows] == ["1", "2", "3"] and [r[1] for r in rows] == ["1", "2", "4"], "rows %s" % rows)
check("lower is better; best: run 2" in out, "best run: " + out)
# run 3: 9.8 vs previous 9.5 = +3.158%, vs best 9.5 = +3.158%; run 2: -5.000% vs previous
prev3 = "%+.3f%%" % ((9.8 - 9.5) / 9.5 * 100)
check(rows[2][-2:] == [prev3, prev3], "run 3 changes %s" % rows[2])
check(rows[1][-3:] == ["-5.000%", "+0.000%", "best"], "run 2 changes %s" % rows[1])

# --metric=KEY is the same as --metric KEY, and options may come before FILE
rc2, out2, err2 = run([evalmesh(), "history", "--metric=f.token_ppl", hist])
check(rc2 == 0 and out2 == out, "--metric=KEY: %d %s" % (rc2, err2))
rc, out, err = run([evalmesh(), "history", hist, "--metrc", "f.token_ppl"])
check(rc == 2 and err == "error: evalmesh history: unknown option '--metrc' (did you mean "
      "'--metric'?) (see evalmesh history --help)\n", "--metrc: %d %r" % (rc, err))

rc, out, err = run([evalmesh(), "history", hist])
check(rc == 0 and "f.token_accuracy (higher is better; best: run 2)" in out, "all metrics: " + out)

rc, out, err = run([evalmesh(), "history", hist, "--metric", "f.token_pl"])
check(rc == 2 and "no metric 'f.token_pl' in any run (it has: f.token_ppl, f.token_accuracy)" in err,
      "unknown metric: %d %s" % (rc, err))
rc, out, err = run([evalmesh(), "history", os.path.join(work, "none.jsonl")])
check(rc == 2 and "cannot read '%s': No such file or directory" % os.path.join(work, "none.jsonl")
      in err, "missing file: %d %s" % (rc, err))
bad = write(os.path.join(work, "bad.jsonl"), "{}\nnot json\n")
rc, out, err = run([evalmesh(), "history", bad])
check(rc == 2 and "no valid run (2 lines skipped)" in err, "no valid line: %d %s" % (rc, err))

# A torn line (an append cut short, without its newline) glued to the next complete run, as an
# older writer left it: the complete run after it is still read, the torn bytes are reported.
torn = entry(9.0, 0.45, "dddd")[:57]
glued = write(os.path.join(work, "glued.jsonl"), "\n".join([
    entry(10.0, 0.40, "a"), torn + entry(9.8, 0.41, "ccc"), entry(9.7, 0.43, "ee")]) + "\n")
rc, out, err = run([evalmesh(), "history", glued, "--metric", "f.token_ppl"])
check(rc == 0, "torn line: exit %d: %s" % (rc, err))
check("%s:2: 57 bytes of a torn line (an append that did not finish) skipped before a complete "
      "results document" % glued in err, "torn line warning: " + err)
rows = series_rows(out)
check([r[1] for r in rows] == ["1", "2", "3"], "torn line: all three runs listed: %s" % rows)
check([(r[3], r[4]) for r in rows] == [("a", "10"), ("ccc", "9.8"), ("ee", "9.7")],
      "torn line rows %s" % rows)
sys.exit(finish())
