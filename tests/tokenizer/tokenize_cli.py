"""`evalmesh tokenize` end to end: llama.cpp's vocabulary tests through the command line
(--split-marker, --ids-only, --no-bos) give exactly the expected ids for Llama 2 (SentencePiece),
GPT-2 and Llama 3; default BOS; token listing; bad input gives one message and exit status 2."""
import os
import subprocess
import sys
import tempfile

DATA = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
BIN = os.environ["EVALMESH_BIN"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402


def run(*args):
    return subprocess.run([BIN, "tokenize", *args], capture_output=True, text=True)


cases = [("llama-spm/ggml-vocab-llama-spm.gguf", "llama-spm/ggml-vocab-llama-spm.gguf"),
         ("gpt-2/ggml-vocab-gpt-2.gguf", "gpt-2/ggml-vocab-gpt-2.gguf"),
         ("llama3/tokenizer.json", "llama3/ggml-vocab-llama-bpe.gguf")]
for tokenizer, test in cases:
    tok = os.path.join(DATA, "tokenizers", tokenizer)
    inp = os.path.join(DATA, "tokenizers", test + ".inp")
    if not os.path.exists(tok) or not os.path.exists(inp):
        print(f"SKIPPED: {tok} is absent (shared test data)")
        sys.exit(77)
    out = run(tok, "--text-file", inp, "--split-marker", "__ggml_vocab_test__", "--ids-only",
              "--no-bos")
    check(out.returncode == 0, f"{tokenizer}: exit {out.returncode} {out.stderr}")
    got = [l.split() for l in out.stdout.split("\n")[:-1]]
    expected = [l.split() for l in open(inp[:-4] + ".out", encoding="utf-8").read().split("\n")[:-1]]
    same = sum(1 for g, e in zip(got, expected) if g == e)
    print(f"{tokenizer}: {same}/{len(expected)} inputs give exactly the expected ids")
    check(len(got) == len(expected) == 46 and same == len(expected), f"{tokenizer} ids")

spm = os.path.join(DATA, "tokenizers/llama-spm/ggml-vocab-llama-spm.gguf")
# BOS by default for Llama 2; the listing shows each token as the vocabulary spells it.
out = run(spm, "Hello world")
check(out.returncode == 0, "default BOS run")
check(out.stdout == "1 15043 3186\n       1 -> '<s>'\n   15043 -> '\u2581Hello'\n"
      "    3186 -> '\u2581world'\n", f"listing: {out.stdout!r}")
out = run(spm, "--parse-special", "--ids-only", "--no-bos", "<s>Hello")
check(out.stdout == "1 15043\n", f"parse-special: {out.stdout!r}")

with tempfile.TemporaryDirectory() as d:
    bad = os.path.join(d, "bad.txt")
    with open(bad, "wb") as f:
        f.write(b"one\n__m__\ntwo \xc3(\n__m__\n")
    out = run(spm, "--text-file", bad, "--split-marker", "__m__", "--ids-only")
    check(out.returncode == 2, f"invalid UTF-8 exit {out.returncode}")
    check(out.stderr == f"tokenize: {bad}: input 2: text is not valid UTF-8 at byte offset 4 "
          "(byte 0xC3)\n", f"invalid UTF-8 message: {out.stderr!r}")
    check(out.stdout.startswith("1 "), "the first input was printed")
    # --name=VALUE works for every option that takes a value
    same = run(spm, "--text-file=" + bad, "--split-marker=__m__", "--ids-only")
    check(same.returncode == 2 and same.stdout == out.stdout and same.stderr == out.stderr,
          f"--text-file=F --split-marker=S: {same.stderr!r}")

out = run(spm)
check(out.returncode == 2 and "either TEXT or --text-file" in out.stderr, "no text")
out = run(spm, "--bogus", "x")
check(out.returncode == 2 and out.stderr == "error: evalmesh tokenize: unknown option '--bogus' "
      "(see evalmesh tokenize --help)\n", f"bad option: {out.stderr!r}")
out = run(spm, "--split-marker")
check(out.returncode == 2 and out.stderr == "error: evalmesh tokenize: option '--split-marker' "
      "needs a value (see evalmesh tokenize --help)\n", f"no value: {out.stderr!r}")
out = run("/nonexistent.gguf", "x")
check(out.returncode == 2 and out.stderr ==
      "tokenize: /nonexistent.gguf: cannot open tokenizer: No such file or directory\n",
      f"missing file: {out.stderr!r}")
sys.exit(finish())
