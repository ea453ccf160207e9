#!/usr/bin/env bash
# Regenerates tests/quant/ggml_reference/: the blocks ggml's own reference quantizers
# (quantize_row_*_ref in llama.cpp's ggml-quants.c, what llama-quantize runs without an importance
# matrix) make of input.f32, the rows of quant_numpy.test_matrix(), and (<type>.imatrix.bin) the
# blocks its importance-weighted quantizers (quantize_<type>(src, dst, nrow, n_per_row, imatrix), as
# llama-quantize --imatrix calls them) make of the same rows with the per-column weights
# importance.f32, quant_numpy.test_importance(). test_quant_blocks.py compares evalmesh's
# quantizers with these bytes.
#   tests/quant/make_ggml_reference.sh [LLAMA_CPP_DIR]
# Without LLAMA_CPP_DIR, llama.cpp's sources come from the llama-cpp-python sdist (pip download;
# the committed files were made from llama-cpp-python 0.3.36). ggml-quants.c is compiled as
# ggml-base is, with plain -O2 for x86-64 (no -march: no fused multiply-adds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/ggml_reference"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=${1:-}
if [ -z "$src" ]; then
  "${PYTHON:-$HOME/.cache/evalmesh/venv/bin/python}" -m pip download --no-deps --no-binary :all: --no-build-isolation -d "$tmp" \
    llama-cpp-python==0.3.36 >&2 || true
  tar xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
  src=$(echo "$tmp"/llama_cpp_python-*/vendor/llama.cpp)
fi
g="$src/ggml"
cc -O2 -std=gnu11 -DNDEBUG -I"$g/include" -I"$g/src" -I"$g/src/ggml-cpu" \
  -ffunction-sections -fdata-sections "$here/ggml_reference_dump.c" "$g/src/ggml-quants.c" \
  -o "$tmp/dump" -lm -no-pie -Wl,--gc-sections
mkdir -p "$out"
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$here')
from quant_numpy import test_matrix
from quant_numpy import test_importance
test_matrix().tofile('$out/input.f32')
test_importance().tofile('$out/importance.f32')"
for t in Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K; do
  "$tmp/dump" "$t" 512 "$out/input.f32" "$out/$t.bin"
done
for t in Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K; do
  "$tmp/dump" "$t" 512 "$out/input.f32" "$out/$t.imatrix.bin" "$out/importance.f32"
done
(cd "$out" && sha256sum input.f32 importance.f32 ./*.bin)
