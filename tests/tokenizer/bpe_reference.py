"""An independent byte-level BPE reference in plain Python: the pre-tokenizer is the real regular
expression run by the `regex` module (Debian python3-regex), then OpenAI's BPE loop (merge the
lowest-ranked adjacent pair everywhere, until none is left) over the byte-to-unicode characters.
Compared with `evalmesh tokenize --ids-only --no-bos` for GPT-2 (GGUF) and Llama 3
(tokenizer.json) on WikiText chunks of several lines (so newlines and runs of spaces are
exercised) and on llama.cpp's test strings."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_vocab import read_gguf_metadata  # noqa: E402
from tokenize_run import evalmesh_ids  # noqa: E402

try:
    import regex
except ImportError:
    print("SKIPPED: the Python module regex is missing (apt-get install python3-regex)")
    sys.exit(77)

DATA = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"""
          r"""[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class Bpe:
    def __init__(self, vocab, merges, pattern, ignore_merges):
        self.vocab = vocab
        self.ranks = {tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m): i
                      for i, m in reversed(list(enumerate(merges)))}
        self.pattern = regex.compile(pattern)
        self.ignore_merges = ignore_merges
        self.byte_char = bytes_to_unicode()
        self.cache = {}

    def word(self, w):
        if w in self.cache:
            return self.cache[w]
        chars = "".join(self.byte_char[b] for b in w.encode("utf-8"))
        if self.ignore_merges and chars in self.vocab:
            return [self.vocab[chars]]
        parts = list(chars)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 60), i) for i, (a, b) in
                     enumerate(zip(parts, parts[1:]))]
            rank, first = min(pairs)
            if rank == 1 << 60:
                break
            a, b = parts[first], parts[first + 1]
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        ids = [self.vocab[p] for p in parts]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        return [i for w in self.pattern.findall(text) for i in self.word(w)]


def main():
    gpt2_path = os.path.join(DATA, "tokenizers/gpt-2/ggml-vocab-gpt-2.gguf")
    llama3_path = os.path.join(DATA, "tokenizers/llama3/tokenizer.json")
    wiki = os.path.join(DATA, "text/wikitext-2-raw-v1.test.txt")
    tests = os.path.join(DATA, "tokenizers/gpt-2/ggml-vocab-gpt-2.gguf.inp")
    for p in (gpt2_path, llama3_path, wiki, tests):
        if not os.path.exists(p):
            print(f"SKIPPED: {p} is absent (shared test data)")
            sys.exit(77)
    kv = read_gguf_metadata(gpt2_path)
    gpt2 = Bpe({t.decode(): i for i, t in enumerate(kv["tokenizer.ggml.tokens"])},
               [m.decode() for m in kv["tokenizer.ggml.merges"]], GPT2, False)
    j = json.load(open(llama3_path, encoding="utf-8"))
    llama3 = Bpe(j["model"]["vocab"], j["model"]["merges"], LLAMA3, j["model"]["ignore_merges"])

    lines = open(wiki, encoding="utf-8").read().split("\n")
    inputs = ["\n".join(lines[i:i + 7]) for i in range(0, 2100, 7)]
    inputs += open(tests, encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    failures = 0
    for name, path, ref in (("gpt-2", gpt2_path, gpt2), ("llama3", llama3_path, llama3)):
        got = evalmesh_ids(path, inputs, "bpe_reference_input.txt")
        same = sum(1 for text, ids in zip(inputs, got) if ref.encode(text) == ids)
        print(f"{name}: {same}/{len(inputs)} inputs agree with the reference")
        if same != len(inputs) or len(got) != len(inputs):
            failures += 1
            for text, ids in zip(inputs, got):
                if ref.encode(text) != ids:
                    print("  differs:", repr(text[:100]), ref.encode(text)[:20], ids[:20])
                    break
    sys.exit(1 if failures else 0)


main()
