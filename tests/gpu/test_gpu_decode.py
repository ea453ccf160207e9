"""GPU test of greedy decoding on the cuda forward (ctest label gpu; tools/gpu-check runs it):
cuda_decode_check on stories260K (F32: the FP32 attention kernel, against the cpu backend), on
evalmesh-mkmodel models made here from seeds: gemma2 (soft-caps, sliding window shorter than the
longest prompt) and qwen3 (q/k norms) in F32, and F16 with GQA (the tensor-core attention,
head_dim 64, reported against the cpu only). Each checks every batching bit-identical and every
step equal to the full forward (cuda_decode_check's header).
Exit 77 (skipped) with the reason when no CUDA device is usable (CPU-only machines, .ci/run).
Usage: test_gpu_decode.py CUDA_DECODE_CHECK MKMODEL"""
import os
import subprocess
import sys
import tempfile

check_bin, mkmodel = sys.argv[1], sys.argv[2]
stories = os.path.join(os.environ.get("EVALMESH_SHARED_DATA", ""), "models", "stories260K.gguf")
BASE = ["--vocab", "300", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
        "--ffn", "512"]
MODELS = [
    ("gemma2", BASE + ["--type", "f32", "--arch", "gemma2", "--sliding-window", "48",
                       "--attn-softcap", "50", "--final-softcap", "30"], "fp32"),
    ("qwen3", BASE + ["--type", "f32", "--arch", "qwen3"], "fp32"),
    ("f16_gqa", BASE + ["--type", "f16"], "bf16"),
]
failed = []


def run_check(model, mode):
    r = subprocess.run([check_bin, model, mode], capture_output=True, text=True, timeout=300)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode == 77:
        sys.exit(77)
    return r.returncode


if not os.path.isfile(stories):
    print(f"skipped stories260K: {stories} is absent")
elif run_check(stories, "fp32") != 0:
    failed.append("stories260K")
with tempfile.TemporaryDirectory() as tmp:
    for name, opts, mode in MODELS:
        path = os.path.join(tmp, name + ".gguf")
        r = subprocess.run([mkmodel, "--out", path, "--seed", "1"] + opts,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"mkmodel {name}: {r.stderr}", file=sys.stderr)
            failed.append(name)
        elif run_check(path, mode) != 0:
            failed.append(name)
print("failed: " + ", ".join(failed) if failed else "all GPU decoding checks passed")
sys.exit(1 if failed else 0)
