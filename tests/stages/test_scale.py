"""Many oversubscribed ranks on one machine (../shared/data; skipped without it): `evalmesh
perplexity` of stories260K on the TinyStories sample (29 windows of n_ctx 64) under mpirun with
RANKS ranks (the first argument; 256 in the optimized build, most of them holding no window)
gives the metrics and printed estimate of one rank, bit for bit. The time is bounded by the
ctest TIMEOUT, not asserted. Usage: test_scale.py RANKS"""
import os
import re
import sys

from eval_helpers import MPIRUN, EvalSession, stories_data

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, check_equal  # noqa: E402

RANKS = int(sys.argv[1])
MODEL, STORIES = stories_data()
if not MPIRUN:
    print("SKIPPED: no mpirun")
    sys.exit(77)

session = EvalSession("eval_scale_")
args = ["perplexity", "-m", MODEL, "-f", STORIES, "-c", "64"]


def exact_metrics(results):
    """metrics.<stage>.<metric> without the timing ones (floats parsed from JSON's shortest
    round-trip text, so equal floats are equal bits)."""
    return {f"{s}.{k}": v["value"] for s, ms in results["metrics"].items() for k, v in ms.items()
            if not v.get("timing")}


def estimate(out):
    m = re.search(r"Final estimate: PPL = \S+ \+/- \S+", out)
    return m.group(0) if m else None


rc1, out1, err1, res1 = session.evalmesh(args)
check_equal(rc1, 0, "one rank: exit status")
rcn, outn, errn, resn = session.evalmesh(args, np=RANKS)
check_equal(rcn, 0, f"{RANKS} ranks: exit status")
check(f"perplexity: 5 stages on {RANKS} ranks" in outn + errn, f"{RANKS} ranks: world size",
      (outn + errn)[-2000:])
if check(res1 is not None and resn is not None, "both wrote results.json", errn[-2000:]):
    one, many = exact_metrics(res1), exact_metrics(resn)
    check_equal(one["ppl.windows"], 29, "one rank: 29 windows")
    check_equal(many, one, f"{RANKS} ranks: the metrics of one rank")
    print(f"{RANKS} ranks: token_ppl {many.get('ppl.token_ppl')!r}, "
          f"nll_mean {many.get('ppl.nll_mean')!r} (one rank: {one.get('ppl.token_ppl')!r})")
check(estimate(out1) is not None, "one rank: estimate printed", out1[-2000:])
check_equal(estimate(outn), estimate(out1), f"{RANKS} ranks: the printed estimate")
session.finish()
