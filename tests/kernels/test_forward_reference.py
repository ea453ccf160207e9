"""The CPU forward against an independent NumPy float64 forward (reference.py).

For each model (the shared stories260K, and small models made by evalmesh-mkmodel covering GQA,
QKV biases, tied and untied heads, RoPE scaling and every weight type) the C driver runs one
window and prints -log p(target) and the argmax per scored position. Checks:
  - per-token nll within NLL_TOL (absolute) of the reference: the C side computes in float32,
    the weights are the same values on both sides (quantized types dequantize exactly);
  - perplexity exp(mean nll) within 1e-5 relative;
  - argmax equal wherever the reference's best logit leads the runner-up by more than 1e-3;
  - a token id outside the vocabulary is exit status 2 with a message naming its position;
  - on a generated model wide enough for several matmul, attention and vocabulary tiles, the
    batch/thread invariance program (test_forward_invariance.c) passes too.
Usage: test_forward_reference.py FORWARD_DRIVER FORWARD_INVARIANCE [MKMODEL]"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

NLL_TOL = 1e-4
PPL_RTOL = 1e-5
failures = []


def run_driver(driver, model, threads, score_from, ids):
    p = subprocess.run([driver, model, str(threads), str(score_from)] + [str(i) for i in ids],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check_model(driver, model, ids, score_from, label):
    meta, tensors, _ = reference.read_gguf(model)
    ids = np.asarray(ids)
    nll_ref, argmax_ref, logits = reference.forward(meta, tensors, ids[:-1], ids[1:])
    rc, out, err = run_driver(driver, model, 2, score_from, ids)
    if rc != 0:
        failures.append("%s: driver exit %d: %s" % (label, rc, err.strip()))
        return
    rows = [line.split() for line in out.strip().splitlines()]
    pos = np.array([int(r[0]) for r in rows])
    nll = np.array([float(r[1]) for r in rows])
    argmax = np.array([int(r[2]) for r in rows])
    want_pos = np.arange(score_from, len(ids) - 1)
    if not np.array_equal(pos, want_pos):
        failures.append("%s: positions %s, expected %s" % (label, pos, want_pos))
        return
    diff = np.abs(nll - nll_ref[score_from:]).max()
    ppl, ppl_ref = np.exp(nll.mean()), np.exp(nll_ref[score_from:].mean())
    top2 = np.sort(logits[score_from:], axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-3
    bad_argmax = np.nonzero(clear & (argmax != argmax_ref[score_from:]))[0]
    print("%-28s tokens %3d  max |nll - ref| %.2e  ppl %.6f (ref %.6f)" %
          (label, len(nll), diff, ppl, ppl_ref))
    if diff > NLL_TOL:
        failures.append("%s: max |nll - ref| = %g > %g" % (label, diff, NLL_TOL))
    if abs(ppl - ppl_ref) / ppl_ref > PPL_RTOL:
        failures.append("%s: ppl %.9g vs reference %.9g" % (label, ppl, ppl_ref))
    if len(bad_argmax):
        failures.append("%s: argmax differs at positions %s" % (label, bad_argmax + score_from))


def check_bad_token(driver, model, n_vocab, label):
    rc, out, err = run_driver(driver, model, 1, 0, [1, 2, n_vocab + 5, 3])
    want = "input token id %d at position 2 is outside the vocabulary (%d)" % (n_vocab + 5, n_vocab)
    if rc != 2 or want not in err:
        failures.append("%s: bad token gave exit %d, stderr %r (expected 2 and %r)" %
                        (label, rc, err, want))


def main():
    driver, invariance = sys.argv[1], sys.argv[2]
    mkmodel = sys.argv[3] if len(sys.argv) > 3 else ""
    shared = os.environ.get("EVALMESH_SHARED_DATA", "")
    stories = os.path.join(shared, "models", "stories260K.gguf")
    ran = False
    rng = np.random.default_rng(7)
    if os.path.exists(stories):
        ids = [1] + list(rng.integers(3, 512, size=80))
        check_model(driver, stories, ids, 0, "stories260K")
        check_model(driver, stories, ids[:40], 20, "stories260K scored from 20")
        check_bad_token(driver, stories, 512, "stories260K")
        # a greedy story from BOS: a trained model predicts its own text well, so the nll values
        # are small and the log-sum-exp has to be precise near 0
        meta, tensors, _ = reference.read_gguf(stories)
        story = [1]
        for _ in range(48):
            _, best, _ = reference.forward(meta, tensors, np.asarray(story), np.asarray(story))
            story.append(int(best[-1]))
        check_model(driver, stories, story, 0, "stories260K greedy story")
        nll_ref, _, _ = reference.forward(meta, tensors, np.asarray(story[:-1]),
                                          np.asarray(story[1:]))
        if not nll_ref.mean() < 1.0:
            failures.append("greedy story: mean nll %g, expected < 1" % nll_ref.mean())
        ran = True
    else:
        print("stories260K.gguf not found under EVALMESH_SHARED_DATA: skipping that model")
    if mkmodel and os.path.exists(mkmodel):
        with tempfile.TemporaryDirectory() as tmp:
            for label, args in MKMODEL_CASES:
                path = os.path.join(tmp, label + ".gguf")
                p = subprocess.run([mkmodel] + args + ["--out", path], capture_output=True,
                                   text=True)
                if p.returncode != 0:
                    failures.append("%s: evalmesh-mkmodel failed: %s" % (label, p.stderr.strip()))
                    continue
                meta, _, _ = reference.read_gguf(path)
                n_vocab = len(meta["tokenizer.ggml.tokens"]) if "tokenizer.ggml.tokens" in meta \
                    else meta["%s.vocab_size" % meta["general.architecture"]]
                ids = list(rng.integers(0, n_vocab, size=140))
                check_model(driver, path, ids, 5, label)
                if label == "q4_0_gqa_tied":
                    check_bad_token(driver, path, n_vocab, label)
                if label == "wide_head_dim":
                    p = subprocess.run([invariance, path], capture_output=True, text=True)
                    print("invariance on %s: %s" % (label, p.stdout.strip()))
                    if p.returncode != 0:
                        failures.append("%s: invariance failed: %s" % (label, p.stderr.strip()))
                ran = True
    else:
        print("evalmesh-mkmodel not built: skipping the generated models")
    if not ran:
        print("SKIPPED: neither stories260K.gguf nor evalmesh-mkmodel is available")
        sys.exit(77)
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


# (label, evalmesh-mkmodel arguments): small shapes that still cross the kernels' tile edges
# (matmul tiles of 128 rows, attention query blocks of 64, vocabulary tiles of 256).
BASE = ["--vocab", "300", "--dim", "64", "--layers", "2", "--heads", "4", "--ffn", "160"]
MKMODEL_CASES = [
    ("f32_mha_untied", BASE + ["--type", "f32"]),
    ("f32_gqa_tied", BASE + ["--type", "f32", "--kv-heads", "2", "--tied"]),
    ("f32_gqa_bias", BASE + ["--type", "f32", "--kv-heads", "1", "--qkv-bias"]),
    ("f16_gqa_bias_tied", BASE + ["--type", "f16", "--kv-heads", "2", "--qkv-bias", "--tied"]),
    ("bf16_gqa", BASE + ["--type", "bf16", "--kv-heads", "2"]),
    ("q8_0_gqa_bias", BASE + ["--type", "q8_0", "--kv-heads", "2", "--qkv-bias"]),
    ("q4_0_gqa_tied", BASE + ["--type", "q4_0", "--kv-heads", "2", "--tied"]),
    ("q4_0_mha_untied", BASE + ["--type", "q4_0", "--dim", "96", "--heads", "3", "--ffn", "288"]),
    ("rope_linear", BASE + ["--kv-heads", "2", "--rope-scaling", "linear", "--rope-factor", "4",
                            "--rope-theta", "500000"]),
    ("rope_llama3", BASE + ["--kv-heads", "2", "--rope-scaling", "llama3", "--rope-factor", "8",
                            "--rope-low", "1", "--rope-high", "4", "--rope-orig-ctx", "64",
                            "--rope-theta", "500000"]),
    # YaRN: an original context of 64 puts the ramp across the middle pairs of head_dim 16
    ("rope_yarn", BASE + ["--kv-heads", "2", "--rope-scaling", "yarn", "--rope-factor", "4",
                          "--rope-orig-ctx", "64", "--rope-beta-fast", "8", "--rope-theta",
                          "10000"]),
    # Llama 3.1 as llama.cpp converts it: no scaling keys, a rope_freqs.weight tensor instead
    ("rope_freqs_tensor", BASE + ["--kv-heads", "2", "--rope-scaling", "llama3", "--rope-factor",
                                  "8", "--rope-low", "1", "--rope-high", "4", "--rope-orig-ctx",
                                  "64", "--rope-theta", "500000", "--rope-freqs"]),
    ("wide_head_dim", ["--vocab", "520", "--dim", "256", "--layers", "1", "--heads", "2",
                       "--kv-heads", "1", "--ffn", "384", "--type", "q8_0"]),
]

if __name__ == "__main__":
    main()
