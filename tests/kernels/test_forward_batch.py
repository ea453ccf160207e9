"""Batches of windows on the CPU forward, per architecture feature: test_forward_batch (the C
program) on models made by evalmesh-mkmodel with GQA, Q/K/V biases and a tied head, a Mistral-style
sliding window, gemma2 (sliding window, soft-capped scores and logits, post-norms, GeGLU), gemma3
(local/global layers with their own RoPE base, q/k norms, post-norms), qwen3 (q/k norms), a
quantized type and F16 (whose one-token products read the halves straight, one_token_quantized.h),
plus the shared stories260K when present: every window's nll and argmax
bit-identical to the window alone in every batch composition and order it tries. It drives
test_forward_shared_prefix the same way: each continuation of a shared prefix bit-identical to its
whole window alone; and test_forward_decode: every decoded sequence's tokens and logits
bit-identical to the full forward, in every batching. PRECISION (ggml, bf16) goes to the program
after the model (ggml: the q8_0 model then runs llama.cpp's 8-bit products; bf16: every model's
products round to BF16).
Usage: test_forward_batch.py FORWARD_BATCH|FORWARD_SHARED_PREFIX|FORWARD_DECODE MKMODEL [PRECISION]"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402

program, mkmodel = sys.argv[1], sys.argv[2]
precision = sys.argv[3:4]
BASE = ["--vocab", "300", "--dim", "64", "--layers", "3", "--heads", "4", "--ffn", "160"]
MODELS = [
    ("llama_gqa_bias_tied", BASE + ["--type", "f32", "--kv-heads", "2", "--qkv-bias", "--tied"]),
    ("mistral_window", BASE + ["--kv-heads", "2", "--sliding-window", "10"]),
    ("gemma2_window_softcap_post_norms",
     BASE + ["--arch", "gemma2", "--head-dim", "32", "--sliding-window", "16", "--attn-softcap",
             "0.5", "--final-softcap", "1.5", "--tied"]),
    ("gemma3_local_global", BASE + ["--arch", "gemma3", "--layers", "7", "--kv-heads", "1",
                                    "--head-dim", "24", "--sliding-window", "20"]),
    ("qwen3_qk_norm", BASE + ["--arch", "qwen3", "--head-dim", "48"]),
    ("q8_0_gqa", BASE + ["--type", "q8_0", "--kv-heads", "2"]),
    ("f16_gqa", BASE + ["--type", "f16", "--kv-heads", "2"]),
]

shared = os.environ.get("EVALMESH_SHARED_DATA", "")
stories = os.path.join(shared, "models", "stories260K.gguf")
runs = ([("stories260K", stories)] if os.path.isfile(stories) else [])
if not runs:
    print(f"note: {stories} absent; the generated models only")
with tempfile.TemporaryDirectory() as tmp:
    for name, opts in MODELS:
        path = os.path.join(tmp, name + ".gguf")
        r = subprocess.run([mkmodel, "--out", path, "--seed", "3"] + opts, capture_output=True,
                           text=True)
        check(r.returncode == 0, f"mkmodel {name}", r.stderr)
        if r.returncode == 0:
            runs.append((name, path))
    for name, path in runs:
        r = subprocess.run([program, path] + precision, capture_output=True, text=True,
                           timeout=600)
        print(f"{name}:\n{r.stdout}", end="")
        check(r.returncode == 0, f"{name}: batches bit-identical to windows alone", r.stderr)
        check("DIFFERENT" not in r.stdout and "bit-identical to alone" in r.stdout,
              f"{name}: every composition compared", r.stdout)
sys.exit(finish())
