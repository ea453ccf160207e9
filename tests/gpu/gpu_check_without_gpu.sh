#!/usr/bin/env bash
# tools/gpu-check on a machine without an NVIDIA GPU prints exactly one line and exits 0, building
# nothing (exit 77, skipped, where nvidia-smi lists a GPU). Usage: gpu_check_without_gpu.sh GPU_CHECK
set -u
if nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  echo "skipped: this machine has an NVIDIA GPU"
  exit 77
fi
out=$("$1" 2>&1)
rc=$?
want="no NVIDIA GPU found: GPU tests and benchmarks skipped"
if [ "$rc" != 0 ] || [ "$out" != "$want" ]; then
  echo "tools/gpu-check: exit $rc, output: $out (expected exit 0 and: $want)"
  exit 1
fi
echo "ok: $want"
