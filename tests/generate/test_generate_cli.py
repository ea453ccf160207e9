"""`evalmesh generate` on stories260K (skipped without the shared data): from "Once upon a time"
the ids and text Hugging Face transformers' greedy generate gives (the committed
transformers_generate_expected.json, with BOS and the prompt's ids as evalmesh's tokenizer gives
them) on 1 and 2 threads; from an empty prompt (BOS alone) with --until "." the text cut before
the first period; with --no-mmap (the weights read into memory of their own) the same ids; and
bad arguments: N not below the context, a missing prompt, an unknown precision, a model without a
tokenizer (exit status 2, each with its message).
Usage: test_generate_cli.py EVALMESH MKMODEL"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402
from generate_fixtures import reference, stories260k  # noqa: E402

evalmesh, mkmodel = sys.argv[1], sys.argv[2]
stories = stories260k()
# BOS "Once upon a time"
reference = reference("transformers_generate_expected.json")["stories260K"][1]


def generate(*args):
    return subprocess.run([evalmesh, "generate", "-m", stories] + list(args), capture_output=True,
                          text=True, timeout=120)


tok = subprocess.run([evalmesh, "tokenize", "--ids-only", stories, "Once upon a time"],
                     capture_output=True, text=True)
check(tok.stdout.split() == [str(i) for i in reference["prompt"]],
      "the prompt's ids are the reference's", tok.stdout)
for threads, *more in (("1",), ("2",), ("1", "--no-mmap")):
    r = generate("-p", "Once upon a time", "-n", "40", "--ids", "-t", threads, *more)
    text, ids = r.stdout.split("\n")[:2]
    check(r.returncode == 0 and ids.split() == [str(i) for i in reference["ids"][:40]],
          f"{threads} thread(s){' '.join([''] + more)}: transformers' 40 ids", r.stdout + r.stderr)
    check(text == ", there was a little girl named Lily. She loved to play outside in the park. "
          "One day, she saw a big, red ball.", f"{threads} thread(s){' '.join([''] + more)}: the text", text)
r = generate("-p", "", "-n", "30", "--until", ".")
check(r.returncode == 0 and r.stdout == "Once upon a time, there was a little girl named Lily\n",
      "BOS alone, cut before the first period", r.stdout + r.stderr)
for args, message in (
        (["-p", "x", "-n", "2048"],
         "max_gen_toks 2048 does not leave room for a prompt in 2048 positions (1 to 2047)"),
        (["-n", "3"], "give -m MODEL and -p PROMPT"),
        (["-p", "x", "--precision", "fast"], "--precision 'fast' is not exact, ggml or bf16")):
    r = generate(*args)
    check(r.returncode == 2 and message in r.stderr, f"{args}: exit 2, '{message}'",
          f"exit {r.returncode}: {r.stderr[-400:]}")
with tempfile.TemporaryDirectory() as tmp:
    bare = os.path.join(tmp, "bare")  # a Hugging Face folder whose tokenizer files are removed
    subprocess.run([mkmodel, "--format", "safetensors", "--out", bare, "--vocab", "300", "--dim",
                    "64", "--layers", "1", "--heads", "4", "--ffn", "128"], check=True,
                   capture_output=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        os.remove(os.path.join(bare, name))
    r = subprocess.run([evalmesh, "generate", "-m", bare, "-p", "x"], capture_output=True,
                       text=True)
    check(r.returncode == 2 and f"model {bare} has no tokenizer" in r.stderr,
          "a model without a tokenizer: exit 2", f"exit {r.returncode}: {r.stderr[-400:]}")
sys.exit(finish())
