"""Dataset inputs end to end with the repository's demo model (recipes/data/demo-model.gguf,
byte-level vocabulary of 258 tokens), so it needs no shared data: empty documents skipped and
counted, documents shorter than one window, JSONL documents, uint32 token files, and bad input
(invalid UTF-8 on one and two ranks, token ids outside the vocabulary, a bad JSONL line, text
too short for one chunk, a wrong EVALMESH_CPU_KERNEL), each with its documented message and exit
status 2; the plain C GEMM kernel gives the same metrics as the default one."""
import json
import os
import re
import sys

from eval_helpers import MPIRUN, EvalSession

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

MODEL = os.path.join(os.environ["EVALMESH_SOURCE_DIR"], "recipes", "data", "demo-model.gguf")

session = EvalSession("eval_inputs_")
evalmesh, write = session.evalmesh, session.write


# 1. Empty documents are skipped and counted; a document shorter than one window is one window.
text = "Once upon a time.\n<doc>\n   \n<doc>\nThe cat sat.\n<doc><doc>Lily ran home fast.\n"
corpus = write("docs.txt", text)
doc_recipe = write("docs.yaml", f"""
name: docs
stages:
  model: {{kind: model, path: "{MODEL}"}}
  data: {{kind: dataset, tokenizer: model, path: "{corpus}", protocol: rolling, max_length: 64, split: separator, separator: "<doc>"}}
  f: {{kind: forward, model: model, data: data}}
  agg: {{kind: aggregate, inputs: [f]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")
rc, out, err, res = evalmesh(["run", doc_recipe])
docs_results = res
check(rc == 0, "docs rc", err[-2000:])
check("5 documents (2 empty, skipped)" in err, "docs counted", err[-2000:])
if res:
    kept = ["Once upon a time.", "The cat sat.", "Lily ran home fast."]
    check(res["metrics"]["f"]["windows"]["value"] == 3, "docs: one window each")
    check(res["metrics"]["f"]["words"]["value"] == sum(len(re.split(r"\s+", d)) for d in kept), "docs words")
    check(res["metrics"]["f"]["bytes"]["value"] == sum(len(d) for d in kept), "docs bytes")

# 2. JSONL documents (one per line, a blank line ignored, an empty text skipped and counted) and
# a uint32 token file.
jdocs = ["Tom had a red ball.", "", "The sun was hot.\nBen drank some water.", "Mia smiled at the dog."]
jsonl = write("docs.jsonl", "\n".join(json.dumps({"id": i, "text": d}) for i, d in enumerate(jdocs)) + "\n\n")
u32 = write("ids.u32", b"".join(((i * 37) % 250 + 1).to_bytes(4, "little") for i in range(300)), "wb")
jrecipe = write("jsonl.yaml", f"""
name: jsonl
stages:
  model: {{kind: model, path: "{MODEL}"}}
  docs: {{kind: dataset, tokenizer: model, path: "{jsonl}", protocol: rolling, max_length: 8}}
  ids: {{kind: dataset, tokenizer: model, path: "{u32}", protocol: chunked, n_ctx: 64}}
  f_docs: {{kind: forward, model: model, data: docs}}
  f_ids: {{kind: forward, model: model, data: ids}}
  agg: {{kind: aggregate, inputs: [f_docs, f_ids]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")
rc, out, err, res = evalmesh(["run", jrecipe])
check(rc == 0, "jsonl rc", err[-2000:])
check("4 documents (1 empty, skipped)" in err, "jsonl counted", err[-2000:])
if res:
    kept = [d for d in jdocs if d]
    md, mi = res["metrics"]["f_docs"], res["metrics"]["f_ids"]
    check(md["words"]["value"] == sum(len(re.split(r"\s+", d)) for d in kept), "jsonl words")
    check(md["bytes"]["value"] == sum(len(d.encode()) for d in kept), "jsonl bytes")
    check(md["windows"]["value"] > 3, "jsonl several windows per document")
    check((mi["windows"]["value"], mi["tokens"]["value"]) == (4, 4 * 31), "u32 chunks", str(mi))
badjson = write("bad.jsonl", '{"text": "fine"}\n{"body": "no text"}\n')
rc, out, err, res = evalmesh(["run", jrecipe, f"stages.docs.path={badjson}"])
check(rc == 2, "bad jsonl rc", f"rc={rc} {err[-1500:]}")
check(f'{badjson}:2: no string field "text"' in err, "bad jsonl message", err[-1500:])

# 2b. detokenize: wikitext scores the detokenized article but counts words and bytes on the
# original, as lm-eval does. The demo model's vocabulary is bytes, so tokens = detokenized bytes.
article = " = Robert = \n\n He was born in 1 @,@ 000 ( in a small town ) ; the \" best \" actor . \n"
detok = " = Robert =\n\nHe was born in 1,000 (in a small town); the \"best\" actor. "  # of the trimmed article
wiki_file = write("wiki.txt", article)
wrecipe = write("wiki.yaml", f"""
name: wiki
stages:
  model: {{kind: model, path: "{MODEL}"}}
  raw: {{kind: dataset, tokenizer: model, path: "{wiki_file}", protocol: rolling, max_length: 16, split: wikitext_article}}
  detok: {{kind: dataset, tokenizer: model, path: "{wiki_file}", protocol: rolling, max_length: 16, split: wikitext_article, detokenize: wikitext}}
  f_raw: {{kind: forward, model: model, data: raw}}
  f_detok: {{kind: forward, model: model, data: detok}}
  agg: {{kind: aggregate, inputs: [f_raw, f_detok]}}
  report: {{kind: report, metrics: agg, outputs: [json]}}
""")
rc, out, err, res = evalmesh(["run", wrecipe])
check(rc == 0, "detok rc", err[-2000:])
if res:
    raw, det = res["metrics"]["f_raw"], res["metrics"]["f_detok"]
    original = article.strip("\n")
    check(det["tokens"]["value"] == len(detok.encode()), "detok tokens", str(det["tokens"]))
    check(raw["tokens"]["value"] == len(original.encode()), "raw tokens", str(raw["tokens"]))
    check((det["words"]["value"], det["bytes"]["value"]) == (len(re.split(r"\s+", original)), len(original.encode())), "detok counts the original", str(det))

# 3. Bad input: one clear error and exit status 2, on one rank and on several.
bad = write("bad.txt", b"Once upon\na ti\xffme.\n" * 50, "wb")
for np in ([None, 2] if MPIRUN else [None]):
    rc, out, err, res = evalmesh(["perplexity", "-m", MODEL, "-f", bad, "-c", "64"], np=np)
    check(rc == 2, f"utf8 np={np} rc", f"rc={rc} {err[-1500:]}")
    check(f"{bad}:2:5: invalid UTF-8 (byte 0xff at byte offset 14)" in err, f"utf8 np={np} message", err[-1500:])
ids = write("ids.u16", bytes([1, 0, 2, 0, 88, 2, 3, 0]), "wb")  # third id is 600 >= 258
ids_recipe = write("ids.yaml", f"""
name: ids
stages:
  model: {{kind: model, path: "{MODEL}"}}
  data: {{kind: dataset, tokenizer: model, path: "{ids}", protocol: chunked, n_ctx: 4}}
  f: {{kind: forward, model: model, data: data}}
  agg: {{kind: aggregate, inputs: [f]}}
""")
rc, out, err, res = evalmesh(["run", ids_recipe])
check(rc == 2, "u16 rc", f"rc={rc} {err[-1500:]}")
check(f"{ids}: token 2 (byte offset 4) is id 600, outside the vocabulary of 258 tokens" in err, "u16 message", err[-1500:])
short = write("short.txt", "Hi.")
rc, out, err, res = evalmesh(["perplexity", "-m", MODEL, "-f", short, "-c", "128"])
check(rc == 2, "short rc", f"rc={rc} {err[-1500:]}")
check(re.search(r"short.txt: the text has \d+ tokens: fewer than one chunk of n_ctx = 128 tokens", err) is not None, "short message", err[-1500:])

# 4. The GEMM microkernel: a wrong name is an error naming the variable; the plain C kernel gives
# the same bits as the one chosen for this CPU.
os.environ["EVALMESH_CPU_KERNEL"] = "sse9"
rc, out, err, res = evalmesh(["run", doc_recipe])
check(rc == 2, "kernel rc", f"rc={rc} {err[-1500:]}")
check(re.search(r"error: rank 0, stage 'f' \(forward\): .*EVALMESH_CPU_KERNEL=sse9 is not a CPU "
                r"kernel \(amx, avx512vnni, avxvnni, avx512bf16, avx512, avx2 or c\)",
                err), "kernel message", err[-1500:])
os.environ["EVALMESH_CPU_KERNEL"] = "c"
rc, out, err, res = evalmesh(["run", doc_recipe])
del os.environ["EVALMESH_CPU_KERNEL"]
check(rc == 0, "c kernel rc", err[-1500:])
if res and docs_results:
    exact = lambda r: {k: v["value"] for k, v in r["metrics"]["f"].items() if not v.get("timing")}
    check(exact(res) == exact(docs_results), "c kernel same metrics", f"{exact(res)} != {exact(docs_results)}")

session.finish()
