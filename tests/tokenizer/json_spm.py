"""The tokenizer.json path for SentencePiece-style files (Llama 2, TinyLlama, Mistral): Llama 2's
vocabulary (read from the GGUF test vocabulary) is written the way Hugging Face's converter does
(merges of every split of a token into two tokens, ordered by the token's score; normalizer
Prepend "▁" + Replace " " -> "▁"; byte_fallback; TemplateProcessing adding <s>).
`evalmesh tokenize` must give the expected ids of llama.cpp's Llama 2 test strings and add BOS by
default."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_vocab import read_gguf_metadata  # noqa: E402
from tokenize_run import BIN, matches_llama_cpp_cases  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
gguf = os.path.join(DATA, "tokenizers/llama-spm/ggml-vocab-llama-spm.gguf")
if not os.path.exists(gguf):
    print(f"SKIPPED: {gguf} is absent (shared test data)")
    sys.exit(77)

kv = read_gguf_metadata(gguf)
tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
scores = kv["tokenizer.ggml.scores"]
types = kv["tokenizer.ggml.token_type"]
vocab = {t: i for i, t in enumerate(tokens)}
merges = []
for i, t in enumerate(tokens):
    if types[i] != 1:
        continue
    for k in range(1, len(t)):
        if t[:k] in vocab and t[k:] in vocab:
            merges.append((-scores[i], i, k, t[:k], t[k:]))
merges.sort()
space = "\u2581"
tokenizer = {
    "version": "1.0",
    "added_tokens": [{"id": i, "content": tokens[i], "special": True, "lstrip": False,
                      "rstrip": False, "normalized": False, "single_word": False}
                     for i in (0, 1, 2)],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": space},
        {"type": "Replace", "pattern": {"String": " "}, "content": space}]},
    "pre_tokenizer": None,
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
              "vocab": vocab, "merges": [f"{m[3]} {m[4]}" for m in merges]},
}
failures = 0
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f)
    if not matches_llama_cpp_cases(path, gguf, "Llama 2 as tokenizer.json"):
        failures += 1
    out = subprocess.run([BIN, "tokenize", path, "--ids-only", "Hello world"],
                         capture_output=True, text=True)
    print("default:", out.stdout.strip())
    if out.stdout != "1 15043 3186\n":
        failures += 1
sys.exit(1 if failures else 0)
