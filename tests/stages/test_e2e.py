"""End-to-end perplexity runs on the real tiny model (../shared/data; skipped without it):
- stories260K on TinyStories text gives a single-digit perplexity with chunked n_ctx 128, and
  WikiText a much higher one (the trained model really works);
- one recipe with chunked, sliding and rolling datasets gives bit-identical results.json metrics
  (timing fields aside) under mpirun with 1, 2, 3 and 4 ranks and with 1 and 2 threads;
- fewer windows than ranks (2 chunks on 4 ranks) gives the same metrics as one rank.
Input handling and bad input are in test_inputs.py (no shared data needed)."""
import hashlib
import math
import os
import re
import sys

from eval_helpers import MPIRUN, EvalSession

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "")
MODEL = os.path.join(DATA, "models", "stories260K.gguf")
STORIES = os.path.join(DATA, "text", "tinystories_sample.txt")
WIKI = os.path.join(DATA, "text", "wikitext-2-raw-v1.test.txt")
if not (os.path.exists(MODEL) and os.path.exists(STORIES) and os.path.exists(WIKI)):
    print(f"SKIPPED: shared data not found under '{DATA}'")
    sys.exit(77)

session = EvalSession("eval_e2e_")
evalmesh, write = session.evalmesh, session.write


def exact_metrics(results):
    """metrics.<stage>.<metric> without the timing ones."""
    return {f"{s}.{k}": v for s, ms in results["metrics"].items() for k, v in ms.items()
            if not v.get("timing")}


# 1. The trained model on its own kind of text, and on WikiText.
rc, out, err, res = evalmesh(["perplexity", "-m", MODEL, "-f", STORIES, "-c", "128"])
m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
check(rc == 0, "stories rc", err[-2000:])
check(m is not None, "stories estimate printed", out[-2000:])
if m and res:
    ppl = res["metrics"]["ppl"]["token_ppl"]["value"]
    print(f"stories260K, TinyStories sample, chunked n_ctx 128: PPL = {ppl:.4f}")
    check(1.0 < ppl < 10.0, "stories single digit", str(ppl))
    check(abs(float(m.group(1)) - ppl) < 1e-4, "stories printed = results.json", m.group(1))
    want_sha = hashlib.sha256(open(STORIES, "rb").read()).hexdigest()
    check(res["dataset"]["sha256"] == want_sha, "dataset sha256", str(res["dataset"]))
    running = re.findall(r"\[(\d+)\]([0-9.]+),", out)
    check([int(i) for i, _ in running] == list(range(1, 15)), "running estimate per chunk", out[:400])
    check(running and running[-1][1] == m.group(1), "running estimate ends at the final one", out[:400])
    tokens = res["metrics"]["ppl"]["tokens"]["value"]
    windows = res["metrics"]["ppl"]["windows"]["value"]
    check(tokens == windows * 63, "stories 63 scored tokens per chunk", f"{tokens} {windows}")
    rc, out, err, wres = evalmesh(["perplexity", "-m", MODEL, "-f", WIKI, "-c", "128",
                                   "--chunks", "16"])
    check(rc == 0, "wiki rc", err[-2000:])
    if wres:
        wppl = wres["metrics"]["ppl"]["token_ppl"]["value"]
        print(f"stories260K, WikiText-2 test, first 16 chunks of 128: PPL = {wppl:.4f}")
        check(wppl > 3 * ppl and wppl > 30, "wiki much higher", f"{wppl} vs {ppl}")
        check(wres["metrics"]["ppl"]["windows"]["value"] == 16, "wiki 16 chunks")

# 2. The same recipe on 1..4 ranks and 1..2 threads: bit-identical metrics.
docs = [p.strip("\n") for p in open(STORIES, encoding="utf-8").read().split("\n\n") if p.strip()]
recipe = write("same.yaml", f"""
name: same
stages:
  model: {{kind: model, path: "{MODEL}"}}
  chunked: {{kind: dataset, tokenizer: model, path: "{STORIES}", protocol: chunked, n_ctx: 64}}
  sliding: {{kind: dataset, tokenizer: model, path: "{STORIES}", protocol: sliding, max_length: 96, stride: 40}}
  rolling: {{kind: dataset, tokenizer: model, path: "{STORIES}", protocol: rolling, max_length: 80, split: blank_line}}
  f_chunked: {{kind: forward, model: model, data: chunked}}
  f_sliding: {{kind: forward, model: model, data: sliding}}
  f_rolling: {{kind: forward, model: model, data: rolling}}
  agg: {{kind: aggregate, inputs: [f_chunked, f_sliding, f_rolling]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")
reference = None
if not MPIRUN:
    print("note: mpirun not found; multi-rank runs skipped")
for np in ([1, 2, 3, 4] if MPIRUN else [None]):
    for threads in [1, 2]:
        overrides = [f"stages.f_{p}.threads={threads}" for p in ["chunked", "sliding", "rolling"]]
        rc, out, err, res = evalmesh(["run", recipe, *overrides], np=np)
        check(rc == 0 and res is not None, f"same np={np} threads={threads} rc", err[-3000:])
        if not res:
            continue
        got = exact_metrics(res)
        if reference is None:
            reference = got
            mr = res["metrics"]["f_rolling"]
            # lm-eval's counts of the original documents (blank-line paragraphs)
            words = sum(len(re.split(r"\s+", d)) for d in docs)
            nbytes = sum(len(d.encode("utf-8")) for d in docs)
            check(mr["words"]["value"] == words, "rolling words", f"{mr['words']} vs {words}")
            check(mr["bytes"]["value"] == nbytes, "rolling bytes", f"{mr['bytes']} vs {nbytes}")
            nll_sum = mr["nll_mean"]["value"] * mr["tokens"]["value"]
            check(math.isclose(mr["word_ppl"]["value"], math.exp(nll_sum / words), rel_tol=1e-12), "word_ppl")
            check(math.isclose(mr["bits_per_byte"]["value"], nll_sum / nbytes / math.log(2), rel_tol=1e-12), "bits_per_byte")
            ms = res["metrics"]["f_sliding"]
            print("reference metrics:", {k: v["value"] for k, v in got.items() if k.endswith("token_ppl")})
        else:
            diff = {k: (reference.get(k), got.get(k)) for k in set(reference) | set(got)
                    if reference.get(k) != got.get(k)}
            check(not diff, f"same np={np} threads={threads} identical", str(diff)[:2000])

# 3. Fewer windows than ranks: 2 chunks over 4 ranks.
small = ["perplexity", "-m", MODEL, "-f", STORIES, "-c", "128", "--chunks", "2"]
rc1, _, err1, res1 = evalmesh(small)
check(rc1 == 0, "2 chunks rc", err1[-2000:])
if MPIRUN and res1:
    rc4, _, err4, res4 = evalmesh(small, np=4)
    check(rc4 == 0, "2 chunks on 4 ranks rc", err4[-2000:])
    if res4:
        check(exact_metrics(res4) == exact_metrics(res1), "2 chunks on 4 ranks identical")
        busy = [r for r in res4["ranks"] if r["windows"] > 0]
        check(len(busy) == 2, "2 chunks on 4 ranks: two ranks busy", str(res4["ranks"]))

session.finish()
