"""The tokenizer.json path for the GPT-2 family: GPT-2's vocabulary and merges (read from the GGUF
test vocabulary) are written as a Hugging Face tokenizer.json with a ByteLevel pre-tokenizer only
(use_regex: GPT-2's rules), merges as ["a", "b"] pairs and <|endoftext|> as a special added token,
plus a tokenizer_config.json asking for BOS. `evalmesh tokenize` must give the expected ids of
llama.cpp's GPT-2 test strings, add BOS by default, and match <|endoftext|> only with
--parse-special."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_vocab import read_gguf_metadata  # noqa: E402
from tokenize_run import BIN, matches_llama_cpp_cases  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
gguf = os.path.join(DATA, "tokenizers/gpt-2/ggml-vocab-gpt-2.gguf")
if not os.path.exists(gguf):
    print(f"SKIPPED: {gguf} is absent (shared test data)")
    sys.exit(77)

kv = read_gguf_metadata(gguf)
tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
eot = tokens.index("<|endoftext|>")
tokenizer = {
    "version": "1.0",
    "added_tokens": [{"id": eot, "content": "<|endoftext|>", "special": True, "lstrip": False,
                      "rstrip": False, "normalized": False, "single_word": False}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                      "use_regex": True},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                       "use_regex": True},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens) if i != eot},
              "merges": [m.decode().split(" ", 1) for m in kv["tokenizer.ggml.merges"]]},
}
failures = 0
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": True, "bos_token": "<|endoftext|>"}, f)
    if not matches_llama_cpp_cases(d, gguf, "GPT-2 as tokenizer.json"):
        failures += 1
    # BOS from tokenizer_config.json; the special token only with --parse-special.
    out = subprocess.run([BIN, "tokenize", d, "--ids-only", "Hello<|endoftext|>"],
                         capture_output=True, text=True)
    special = subprocess.run([BIN, "tokenize", d, "--ids-only", "--parse-special",
                              "Hello<|endoftext|>"], capture_output=True, text=True)
    print("plain:", out.stdout.strip(), "| parse-special:", special.stdout.strip())
    if special.stdout != f"{eot} 15496 {eot}\n":
        failures += 1
    if not out.stdout.startswith(f"{eot} 15496 ") or len(out.stdout.split()) <= 3:
        failures += 1
sys.exit(1 if failures else 0)
