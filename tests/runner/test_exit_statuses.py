"""`evalmesh --help` lists every exit status of README's "Exit statuses" table, each with the
meaning the README's row starts with (both come from the table in util/exit_status.c and
README.md): a status added to one without the other fails here."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from checks import check, finish  # noqa: E402

BIN = os.environ["EVALMESH_BIN"]
readme = open(os.path.join(os.environ["EVALMESH_SOURCE_DIR"], "README.md")).read()
section = re.search(r"^## Exit statuses\n(.*?)^## ", readme, re.S | re.M)
check(section is not None, "README has an 'Exit statuses' section")
documented = {int(m.group(1)): m.group(2).strip()
              for m in re.finditer(r"^\| (\d+) \| (.*) \|$", section.group(1) if section else "",
                                   re.M)}
p = subprocess.run([BIN, "--help"], capture_output=True, text=True)
check(p.returncode == 0, "--help exits 0", str(p.returncode))
listing = p.stdout.split("\nexit statuses:\n")
check(len(listing) == 2, "--help has an 'exit statuses:' list", p.stdout)
helped = {int(m.group(1)): m.group(2)
          for m in re.finditer(r"^  (\d+)  (.+)$", listing[-1], re.M)}
check(sorted(documented) == list(range(7)), "README documents statuses 0..6", str(documented))
check(sorted(helped) == sorted(documented), "--help lists the README's statuses",
      f"--help {sorted(helped)}, README {sorted(documented)}")
for status, meaning in helped.items():
    check(documented.get(status, "").startswith(meaning),
          f"status {status}: README's meaning starts with --help's '{meaning}'",
          documented.get(status, "(missing)"))
sys.exit(finish())
