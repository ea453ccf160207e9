"""GPU tests of the cuda forward (ctest label gpu; tools/gpu-check runs them): the cuda backend
against the cpu backend through cuda_forward_check (tolerances in its header; each window's
results bit-identical across repeated runs and batch compositions, score_batch) on
  - stories260K (../shared/data/models, F32: the fp32 tolerances, PPL within 1e-4 relative),
  - SmolLM2-135M-Instruct Q4_1 when tools/fetch-smollm2 has cached it (bf16 tolerances),
  - evalmesh-mkmodel models made here from seeds: F32 with GQA, with Q/K/V biases and a tied
    head, the qwen3 (q/k norms), gemma2 (soft-caps, sliding window, GeGLU) and gemma3 (post-norms,
    own sliding RoPE base) architectures in F32; F16, BF16 and every device-dequantized type
    (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), the Q4_K_M mix and IQ4_NL (dequantized on
    the host) in the bf16 tolerances; each also against a second model for the paired KL;
  - the weight storage options (device_weights.cuh): Q4_0, Q4_K and the torchao int4 (g128) and
    int8 weight-only types (quantized in memory from F32 models) kept quantized, each window's
    results bit-identical to those with resident BF16 copies; an F32 model with f32_weights
    bfloat16 in the bf16 tolerances.
Exit 77 (skipped) with the reason when no CUDA device is usable (CPU-only machines, .ci/run).
Usage: test_gpu_forward.py CUDA_FORWARD_CHECK MKMODEL"""
import os
import subprocess
import sys
import tempfile

check_bin, mkmodel = sys.argv[1], sys.argv[2]
shared = os.environ.get("EVALMESH_SHARED_DATA", "")
stories = os.path.join(shared, "models", "stories260K.gguf")
cache = os.environ.get("EVALMESH_CACHE", os.path.expanduser("~/.cache/evalmesh"))
smollm2 = os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

BASE = ["--vocab", "300", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
        "--ffn", "512"]
# (name, mkmodel options, mode, cuda_forward_check options)
MODELS = [
    ("f32_gqa", BASE + ["--type", "f32"], "fp32", []),
    ("f32_bias_tied", BASE + ["--type", "f32", "--qkv-bias", "--tied"], "fp32", []),
    ("qwen3", BASE + ["--type", "f32", "--arch", "qwen3"], "fp32", []),
    ("gemma2", BASE + ["--type", "f32", "--arch", "gemma2", "--sliding-window", "48",
                       "--attn-softcap", "50", "--final-softcap", "30"], "fp32", []),
    ("gemma3", BASE + ["--type", "f32", "--arch", "gemma3", "--sliding-window", "48"], "fp32", []),
] + [(t, BASE + ["--type", t], "bf16", []) for t in
     ["f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m",
      "iq4_nl"]] + [
    ("q4_0 kept quantized", BASE + ["--type", "q4_0"], "bf16", ["--kept-quantized"]),
    ("q4_k kept quantized", BASE + ["--type", "q4_k", "--tied"], "bf16", ["--kept-quantized"]),
    ("torchao int4 g128 kept quantized", BASE + ["--type", "f32"], "bf16",
     ["--quantize", "int4_weight_only_g128", "--kept-quantized"]),
    ("torchao int8 kept quantized", BASE + ["--type", "f32"], "bf16",
     ["--quantize", "int8_weight_only", "--kept-quantized"]),
    ("f32_weights bfloat16", BASE + ["--type", "f32", "--qkv-bias"], "bf16",
     ["--f32-weights-bf16"]),
]

failed = []


def run_check(model, mode, other=None, extra=()):
    args = [check_bin, model, mode] + ([other] if other else []) + list(extra)
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode == 77:  # no usable CUDA device: the whole test is skipped, with its reason
        sys.exit(77)
    return r.returncode


first = run_check(stories, "fp32") if os.path.isfile(stories) else None
if first is None:
    print(f"skipped stories260K: {stories} is absent")
elif first != 0:
    failed.append("stories260K")
if os.path.isfile(smollm2):
    if run_check(smollm2, "bf16") != 0:
        failed.append("SmolLM2-135M")
else:
    print(f"skipped SmolLM2-135M: not cached at {smollm2} (tools/fetch-smollm2)")

with tempfile.TemporaryDirectory() as tmp:
    for name, opts, mode, extra in MODELS:
        paths = []
        for seed in ("1", "2"):
            path = os.path.join(tmp, f"{name.replace(' ', '_')}-{seed}.gguf")
            r = subprocess.run([mkmodel, "--out", path, "--seed", seed] + opts,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"mkmodel {name}: {r.stderr}", file=sys.stderr)
                failed.append(name)
                break
            paths.append(path)
        if len(paths) == 2 and run_check(paths[0], mode, paths[1], extra) != 0:
            failed.append(name)

print("failed: " + ", ".join(failed) if failed else "all GPU forward checks passed")
sys.exit(1 if failed else 0)
