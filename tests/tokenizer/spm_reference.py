"""An independent SentencePiece-BPE reference in plain Python (a GGUF reader of its own and the
naive algorithm: repeatedly merge the adjacent pair forming the highest-scoring token, leftmost on
ties; byte fallback <0xNN>), compared with `evalmesh tokenize --ids-only --no-bos` on every line of
the TinyStories sample (stories260K's own vocabulary) and on WikiText lines (Llama 2's
vocabulary). Prints the ids of one sentence, which tokenizer_stories.c checks against the C
tokenizer."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_vocab import read_gguf_metadata  # noqa: E402
from tokenize_run import evalmesh_ids  # noqa: E402

DATA = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")


def read_gguf_vocab(path):
    """tokens, scores, types from a GGUF file's metadata."""
    kv = read_gguf_metadata(path)
    return kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"], kv["tokenizer.ggml.token_type"]


class Spm:
    def __init__(self, path):
        tokens, scores, types = read_gguf_vocab(path)
        self.ids = {}
        for i, t in enumerate(tokens):
            self.ids.setdefault(t, i)
        self.scores = scores
        self.byte_ids = {}
        for i, (t, ty) in enumerate(zip(tokens, types)):
            if ty == 6:
                self.byte_ids[int(t[3:5], 16)] = i

    def encode(self, text):
        if not text:
            return []
        s = ("\u2581" + text.replace(" ", "\u2581")).encode()
        chars = list(s.decode())
        syms = [c.encode() for c in chars]
        while True:
            best = None
            for i in range(len(syms) - 1):
                tid = self.ids.get(syms[i] + syms[i + 1])
                if tid is not None and (best is None or self.scores[tid] > best[0]):
                    best = (self.scores[tid], i)
            if best is None:
                break
            i = best[1]
            syms[i:i + 2] = [syms[i] + syms[i + 1]]
        out = []
        for sym in syms:
            if sym in self.ids:
                out.append(self.ids[sym])
            else:
                out.extend(self.byte_ids[b] for b in sym)
        return out


def main():
    stories = os.path.join(DATA, "models/stories260K.gguf")
    llama = os.path.join(DATA, "tokenizers/llama-spm/ggml-vocab-llama-spm.gguf")
    sample = os.path.join(DATA, "text/tinystories_sample.txt")
    wiki = os.path.join(DATA, "text/wikitext-2-raw-v1.test.txt")
    for p in (stories, llama, sample, wiki):
        if not os.path.exists(p):
            print(f"SKIPPED: {p} is absent (shared test data)")
            sys.exit(77)
    failures = 0
    checks = [(stories, [l for l in open(sample, encoding="utf-8").read().split("\n") if l]),
              (llama, [l for l in open(wiki, encoding="utf-8").read().split("\n") if l][:60])]
    for tokenizer, lines in checks:
        ref = Spm(tokenizer)
        got = evalmesh_ids(tokenizer, lines, "spm_reference_input.txt")
        same = sum(1 for line, ids in zip(lines, got) if ref.encode(line) == ids)
        print(f"{os.path.basename(tokenizer)}: {same}/{len(lines)} lines agree with the reference")
        if same != len(lines) or len(got) != len(lines):
            failures += 1
            for line, ids in zip(lines, got):
                if ref.encode(line) != ids:
                    print("  differs:", repr(line[:80]), ref.encode(line)[:20], ids[:20])
                    break
    # The ids tokenizer_stories.c expects for this sentence come from here.
    ids = Spm(stories).encode("Once upon a time, there was a little girl named Lily.")
    print("stories260K ids:", ids)
    sys.exit(1 if failures else 0)


main()
