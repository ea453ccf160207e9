"""Runs `evalmesh tokenize --ids-only --no-bos` on many texts at once (one file, texts separated
by llama.cpp's test marker) for the Python tokenizer tests, and reads the ids back per text."""
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
