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

DATA = os.environ.get("EVALMESH_SHARED_DATA", "")
MODEL = os.path.join(DATA, "models", "stories260K.gguf")
STORIES = os.path.join(DATA, "text", "tinystories_sample.txt")
WIKI = os.path.join(DATA, "text", "wikitext-2-raw-v1.test.txt")
if not (os.path.exists(MODEL) and os.path.exists(STORIES) and os.path.exists(WIKI)):
    print(f"SKIPPED: shared data not found under '{DATA}'")
    sys.exit(77)

session = EvalSession("eval_e2e_")
check, evalmesh, write = session.check, session.evalmesh, session.write


def exact_metrics(results):
    """metrics.<stage>.<metric> without the timing ones."""
    return {f"{s}.{k}": v for s, ms in results["metrics"].items() for k, v in ms.items()
            if not v.get("timing")}


# 1. The trained model on its own kind of text, and on WikiText.
rc, out, err, res = evalmesh(["perplexity", "-m", MODEL, "-f", STORIES, "-c", "128"])
m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
check("stories rc", rc == 0, err[-2000:])
check("stories estimate printed", m is not None, out[-2000:])
if m and res:
    ppl = res["metrics"]["ppl"]["token_ppl"]["value"]
    print(f"stories260K, TinyStories sample, chunked n_ctx 128: PPL = {ppl:.4f}")
    check("stories single digit", 1.0 < ppl < 10.0, str(ppl))
    check("stories printed = results.json", abs(float(m.group(1)) - ppl) < 1e-4, m.group(1))
    want_sha = hashlib.sha256(open(STORIES, "rb").read()).hexdigest()
    check("dataset sha256", res["dataset"]["sha256"] == want_sha, str(res["dataset"]))
    running = re.findall(r"\[(\d+)\]([0-9.]+),", out)
    check("running estimate per chunk", [int(i) for i, _ in running] == list(range(1, 15)), out[:400])
    check("running estimate ends at the final one", running and running[-1][1] == m.group(1), out[:400])
    tokens = res["metrics"]["ppl"]["tokens"]["value"]
    windows = res["metrics"]["ppl"]["windows"]["value"]
    check("stories 63 scored tokens per chunk", tokens == windows * 63, f"{tokens} {windows}")
    rc, out, err, wres = evalmesh(["perplexity", "-m", MODEL, "-f", WIKI, "-c", "128",
                                   "--chunks", "16"])
    check("wiki rc", rc == 0, err[-2000:])
    if wres:
        wppl = wres["metrics"]["ppl"]["token_ppl"]["value"]
        print(f"stories260K, WikiText-2 test, first 16 chunks of 128: PPL = {wppl:.4f}")
        check("wiki much higher", wppl > 3 * ppl and wppl > 30, f"{wppl} vs {ppl}")
        check("wiki 16 chunks", wres["metrics"]["ppl"]["windows"]["value"] == 16)

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
        check(f"same np={np} threads={threads} rc", rc == 0 and res is not None, err[-3000:])
        if not res:
            continue
        got = exact_metrics(res)
        if reference is None:
            reference = got
            mr = res["metrics"]["f_rolling"]
            # lm-eval's counts of the original documents (blank-line paragraphs)
            words = sum(len(re.split(r"\s+", d)) for d in docs)
            nbytes = sum(len(d.encode("utf-8")) for d in docs)
            check("rolling words", mr["words"]["value"] == words, f"{mr['words']} vs {words}")
            check("rolling bytes", mr["bytes"]["value"] == nbytes, f"{mr['bytes']} vs {nbytes}")
            nll_sum = mr["nll_mean"]["value"] * mr["tokens"]["value"]
            check("word_ppl", math.isclose(mr["word_ppl"]["value"], math.exp(nll_sum / words), rel_tol=1e-12))
            check("bits_per_byte", math.isclose(mr["bits_per_byte"]["value"], nll_sum / nbytes / math.log(2), rel_tol=1e-12))
            ms = res["metrics"]["f_sliding"]
            print("reference metrics:", {k: v["value"] for k, v in got.items() if k.endswith("token_ppl")})
        else:
            diff = {k: (reference.get(k), got.get(k)) for k in set(reference) | set(got)
                    if reference.get(k) != got.get(k)}
            check(f"same np={np} threads={threads} identical", not diff, str(diff)[:2000])

# 3. Fewer windows than ranks: 2 chunks over 4 ranks.
small = ["perplexity", "-m", MODEL, "-f", STORIES, "-c", "128", "--chunks", "2"]
rc1, _, err1, res1 = evalmesh(small)
check("2 chunks rc", rc1 == 0, err1[-2000:])
if MPIRUN and res1:
    rc4, _, err4, res4 = evalmesh(small, np=4)
    check("2 chunks on 4 ranks rc", rc4 == 0, err4[-2000:])
    if res4:
        check("2 chunks on 4 ranks identical", exact_metrics(res4) == exact_metrics(res1))
        busy = [r for r in res4["ranks"] if r["windows"] > 0]
        check("2 chunks on 4 ranks: two ranks busy", len(busy) == 2, str(res4["ranks"]))

session.finish()
