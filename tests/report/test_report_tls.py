"""TLS for pushes: a webhook over HTTPS with a self-signed certificate (made here with openssl) is
refused by default (verification is on), accepted with `ca_path` naming the certificate, and
accepted with `verify_tls: false`."""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from report_helpers import Webhook, driver, report_recipe, run, skip, tempdir
from checks import check, finish  # noqa: E402

if not shutil.which("openssl"):
    skip("openssl is not installed")
work = tempdir()
cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
rc, out, err = run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"])
check(rc == 0, "openssl: " + err)
hook = Webhook(tls=(cert, key))
check(hook.url.startswith("https://"), hook.url)


def attempt(name, extra):
    path = report_recipe(work, name, """\
      - {type: webhook, url: %s, required: true, retries: 0%s}
""" % (hook.url, extra))
    return run([driver(), path, os.path.join(work, name)])


rc, out, err = attempt("default", "")
check(rc == 4, "self-signed certificate refused by default: exit %d: %s" % (rc, err))
check("certificate" in err, "names the certificate problem: " + err)
check(hook.requests == [], "nothing delivered")

rc, out, err = attempt("ca", ", ca_path: " + cert)
check(rc == 0, "with ca_path: exit %d: %s" % (rc, err))
check(len(hook.requests) == 1, "delivered with ca_path")

missing = os.path.join(work, "none.pem")
rc, out, err = attempt("ca_missing", ", ca_path: " + missing)
check(rc == 2 and "stage 'out': ca_path '%s': No such file or directory" % missing in err,
      "a CA file that does not exist: exit %d: %s" % (rc, err))

rc, out, err = attempt("insecure", ", verify_tls: false")
check(rc == 0 and len(hook.requests) == 2, "verify_tls false: exit %d: %s" % (rc, err))
hook.close()
sys.exit(finish())
