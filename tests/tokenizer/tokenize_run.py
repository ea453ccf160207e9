"""Runs `evalmesh tokenize --ids-only --no-bos` on many texts at once (one file, texts separated
by llama.cpp's test marker) for the Python tokenizer tests, reads the ids back per text, and
checks them against llama.cpp's expected ids for its test strings."""
import os
import subprocess
import sys

BIN = os.environ.get("EVALMESH_BIN", "evalmesh")
MARKER = "__ggml_vocab_test__"


def tokenize_file(tokenizer, text_file):
    """evalmesh's ids for each MARKER-separated text of text_file: (the finished process, a list
    of id lists as strings, one per text)."""
    out = subprocess.run([BIN, "tokenize", tokenizer, "--text-file", text_file, "--split-marker",
                          MARKER, "--ids-only", "--no-bos"], capture_output=True, text=True)
    return out, [l.split() for l in out.stdout.split("\n")[:-1]]


def evalmesh_ids(tokenizer, texts, file_name):
    """evalmesh's ids (ints) for each text, written to file_name in EVALMESH_BUILD_DIR first;
    exits 1 with evalmesh's message if it fails."""
    path = os.path.join(os.environ.get("EVALMESH_BUILD_DIR", "."), file_name)
    with open(path, "w", encoding="utf-8") as f:
        for text in texts:
            f.write(text + "\n" + MARKER + "\n")
    out, ids = tokenize_file(tokenizer, path)
    if out.returncode != 0:
        print(out.stderr)
        sys.exit(1)
    return [[int(x) for x in l] for l in ids]


def matches_llama_cpp_cases(tokenizer, gguf, label):
    """Tokenizes llama.cpp's test strings for a vocabulary (GGUF.inp) with tokenizer and compares
    with their expected ids (GGUF.out). Prints how many agree, and on a mismatch evalmesh's stderr
    and the first difference; returns True when evalmesh succeeded and every string agrees."""
    out, got = tokenize_file(tokenizer, gguf + ".inp")
    expected = [l.split() for l in open(gguf + ".out", encoding="utf-8").read().split("\n")[:-1]]
    same = sum(1 for g, e in zip(got, expected) if g == e)
    print(f"{label}: {same}/{len(expected)} test strings give the expected ids")
    if out.returncode != 0 or same != len(expected) or len(got) != len(expected):
        print(out.stderr)
        for g, e in zip(got, expected):
            if g != e:
                print("  first difference:", g[:12], e[:12])
                break
        return False
    return True
