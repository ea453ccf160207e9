"""Every runnable row of the pre-tokenizer table against the PyPI `tokenizers` package: for each
row, GPT-2's vocabulary and merges (exported from the GGUF test vocabulary; its first 8000 tokens,
the 256 bytes and the results of the first merges, so that 27 files load quickly) go into a
tokenizer.json whose pre_tokenizer is a Sequence of Split steps with the row's expressions (as
written in the table) then ByteLevel; `evalmesh tokenize` on that file (which must resolve to the
same row) and tokenizers' own encoder (Oniguruma regexes, Unicode classes) must give the same ids
for strings written for the rows: runs of digits, contractions ('s 'll 'RE), CJK, emoji, runs of
spaces and tabs, \r\n, accented letters, punctuation. Rows run by llama.cpp's hand-written code
only (Kimi K2's \p{Han}+, AFMoE's digits) have no regex to hand to tokenizers; the C test checks
them. Usage: pre_rows_reference.py TABLE_DUMP_BINARY."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_tokenizers import require_tokenizers  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
GGUF = os.path.join(DATA, "tokenizers/gpt-2/ggml-vocab-gpt-2.gguf")
if not os.path.exists(GGUF):
    print(f"SKIPPED: {GGUF} is absent (shared test data)")
    sys.exit(77)
require_tokenizers()

from tokenizers import Tokenizer  # noqa: E402
from gguf_vocab import read_gguf_metadata  # noqa: E402
from tokenize_run import evalmesh_ids  # noqa: E402

TEXTS = [
    "Hello world! It's 2024, they'll say: we've 12345678 reasons.",
    "I'M SURE YOU'LL SEE THEY'RE HERE, DON'T YOU'D?",
    "digits: 1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 007",
    "   leading spaces, two  spaces,\ttabs\t\tand trailing   ",
    "line one\r\nline two\n\nline three\r\n\r\n  indented\n",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c9COLE \u00c0 la fa\u00e7on Stra\u00dfe",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u6587\u672c\uff0c"
    "\u8fd8\u6709\u3002\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "emoji \U0001F999\U0001F389 ok \u2764\ufe0f done",
    "code: if (x >= 10) { return a_b->c[i] + \"str\"; } // done",
    "mixed123abc ABC123 x2y3 HTTPServer camelCase snake_case",
    "<sentinel:42> IMGIMGABCZ  \t  \n",
]


def main():
    dump = subprocess.run([sys.argv[1], "--dump"], capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in dump.stdout.split("\n") if line]
    kv = read_gguf_metadata(GGUF)
    tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
    kept = {t: i for i, t in enumerate(tokens[:8000])}
    merges = [m.decode().split(" ", 1) for m in kv["tokenizer.ggml.merges"]]
    model = {"type": "BPE", "vocab": kept,
             "merges": [m for m in merges if m[0] in kept and m[1] in kept and m[0] + m[1] in kept]}
    failures, compared = 0, 0
    with tempfile.TemporaryDirectory() as d:
        for label, *exprs in rows:
            if any(e in ("\\p{Han}+", "\\p{AFMoE_digits}") for e in exprs):
                print(f"{label}: hand-written in llama.cpp, checked by tokenizer_pre_table")
                continue
            steps = [{"type": "Split", "pattern": {"Regex": e}, "behavior": "Isolated",
                      "invert": False} for e in exprs]
            steps.append({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                          "use_regex": False})
            tj = {"version": "1.0", "added_tokens": [], "normalizer": None,
                  "pre_tokenizer": {"type": "Sequence", "pretokenizers": steps},
                  "post_processor": None, "decoder": None, "model": model}
            path = os.path.join(d, f"{label}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(tj, f)
            reference = Tokenizer.from_file(path)
            got = evalmesh_ids(path, TEXTS, f"pre_rows_{label}.txt")
            same = 0
            for text, ids in zip(TEXTS, got):
                want = reference.encode(text, add_special_tokens=False).ids
                if ids == want:
                    same += 1
                    continue
                pieces = reference.pre_tokenizer.pre_tokenize_str(text)
                print(f"  {label} differs on {text!r}\n    tokenizers: {want}\n"
                      f"    evalmesh:   {ids}\n    tokenizers' words: {[p for p, _ in pieces]}")
            print(f"{label}: {same}/{len(TEXTS)} strings give tokenizers' ids")
            compared += 1
            failures += same != len(TEXTS) or len(got) != len(TEXTS)
    print(f"{compared} rows compared, {failures} differ")
    sys.exit(1 if failures or compared < 25 else 0)


main()
