"""Bad report options and output paths: an unknown output type (with a suggestion), options that
break the schema, output paths that cannot be written (caught before the run when they are
outside the run directory, and at run time inside it, where the other outputs are still
written); each with one message naming the place and a documented exit status."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import driver, report_recipe, run, tempdir
from checks import check, finish  # noqa: E402

work = tempdir()


def attempt(name, outputs, run_dir=None):
    path = report_recipe(work, name, outputs)
    run_dir = run_dir or os.path.join(work, name)
    rc, out, err = run([driver(), path, run_dir])
    return path, rc, out, err, run_dir


# Unknown output types: exit 2 at the type's line and column.
path, rc, out, err, d = attempt("pdf", "      - table\n      - pdf\n")
check(rc == 2, "unknown type: exit %d: %s" % (rc, err))
check("%s:22:9: stage 'out': unknown output type 'pdf' (one of table, json, history, html, "
      "pushgateway, webhook)" % path in err, "message: " + err)
path, rc, out, err, d = attempt("jsn", "      - {type: jsn, path: r.json}\n")
check(rc == 2 and "%s:21:16: stage 'out': unknown output type 'jsn' (did you mean 'json'?)" % path
      in err, "suggestion: %d %s" % (rc, err))
check(not os.path.exists(os.path.join(d, "r.json")), "nothing written")

# Options the schema rejects: exit 2 naming the place.
path, rc, out, err, d = attempt("retries", "      - {type: webhook, url: http://127.0.0.1:9, retries: -1}\n")
check(rc == 2 and path + ":21:" in err and "retries" in err, "negative retries: %d %s" % (rc, err))
path, rc, out, err, d = attempt("empty", "      []\n")
check(rc == 2 and path + ":21:7" in err, "no outputs: %d %s" % (rc, err))
path, rc, out, err, d = attempt("nopath", "      - history\n")
check(rc == 2 and "%s:21:9: stage 'out': history output needs `path`" % path in err,
      "history without a path: %d %s" % (rc, err))

# Paths outside the run directory are checked before anything runs.
path, rc, out, err, d = attempt("hist", "      - json\n      - {type: history, path: /etc/hostname/h.jsonl}\n")
check(rc == 2 and "%s:22:16: stage 'out': cannot write history output '/etc/hostname/h.jsonl': a "
      "folder on its path is a file" % path in err, "history under a file: %d %s" % (rc, err))
check(not os.path.exists(os.path.join(d, "results.json")), "nothing written")
path, rc, out, err, d = attempt("dir", "      - {type: json, path: %s}\n" % work)
check(rc == 2 and "cannot write json output '%s': it is a directory" % work in err,
      "json onto a directory: %d %s" % (rc, err))

# Inside the run directory a path is known only at run time: exit 4, the other outputs written.
run_dir = os.path.join(work, "rt")
os.makedirs(os.path.join(run_dir, "report.html"))
path, rc, out, err, d = attempt("rt", "      - html\n      - json\n", run_dir)
check(rc == 4, "html onto a directory at run time: exit %d: %s" % (rc, err))
check("stage 'out'" in err and "cannot write '%s'" % os.path.join(run_dir, "report.html") in err, "message: " + err)
check(os.path.exists(os.path.join(run_dir, "results.json")), "json still written")
sys.exit(finish())
