"""The CPU forward on models whose matrices are in the table's quantized types, against the NumPy
float64 reference forward (reference.py) fed with the same weights as the PyPI gguf package
dequantizes them. Models come from evalmesh-mkmodel (--type q4_1, q5_0, q5_1, q2_k .. q6_k,
iq4_nl, iq4_xs, tq2_0 and the q4_k_m mix of Q4_K and Q6_K). Since dequantization is exact, the
C forward sees the same weights; the checks are those of test_forward_reference.py: per-token
nll within 1e-4 of the reference, perplexity within 1e-5 relative, argmax equal where clear.
The q4_k_m model also runs the batch/thread/microkernel invariance program.
The types evalmesh-mkmodel has no quantizer for (the IQ lattice types, TQ1_0, MXFP4, NVFP4) run
on the F32 model with its matrices replaced by random blocks of the type (ggml_blocks.py, small
scales), written with gguf's GGUFWriter.
Usage: test_forward_ggml_types.py FORWARD_DRIVER FORWARD_INVARIANCE MKMODEL (needs gguf)."""
import os
import subprocess
import sys
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "model"))
from gguf_package import require_gguf  # noqa: E402

require_gguf()
import gguf  # noqa: E402
from gguf import GGMLQuantizationType, GGML_QUANT_SIZES, quants  # noqa: E402

sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "support"))
import reference  # noqa: E402
from checks import check, finish  # noqa: E402
from gguf_reader import read_gguf_index  # noqa: E402
from ggml_blocks import random_blocks  # noqa: E402

NLL_TOL = 1e-4
PPL_RTOL = 1e-5

# Row lengths must be whole 256-value super-blocks for the K types: dim 256, ffn 512.
BASE = ["--vocab", "300", "--dim", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
        "--ffn", "512"]
CASES = [(t, BASE + ["--type", t]) for t in
         ("q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs",
          "tq2_0")]
CASES += [("q4_k_m_tied", BASE + ["--type", "q4_k_m", "--tied", "--layers", "8"]),
          ("q5_k_m", BASE + ["--type", "q5_k_m", "--qkv-bias"])]


RANDOM_TYPES = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0",
                "MXFP4", "NVFP4"]


def with_random_matrices(src, dst, type_name, rng, f16=0x0C00):
    """Copies the GGUF file src (but its tokenizer) to dst with every matrix replaced by random blocks of type_name
    whose scales are small (f16 2^-12 unless given, E8M0 2^-9, UE4M3 2^-7), so that the forward
    stays in a sane range."""
    qtype = GGMLQuantizationType[type_name]
    block, size = GGML_QUANT_SIZES[qtype]
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
    for name, field in r.fields.items():
        if name.startswith(("GGUF.", "tokenizer.")) or name == "general.architecture":
            continue  # the byte tokenizer's empty merges would not write; the forward needs none
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), field.types[0], sub_type=sub)
    for t in r.tensors:
        shape = [int(d) for d in t.shape]  # innermost first
        if len(shape) == 2:
            n_out, n_in = shape[1], shape[0]
            raw = random_blocks(type_name, n_out * n_in // block, size, rng, [f16],
                                [119], [0x08])
            w.add_tensor(t.name, raw.reshape(n_out, -1), raw_dtype=qtype)  # bytes (n_out, row)
        else:
            w.add_tensor(t.name, np.array(t.data, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_with_gguf(path):
    """(meta, {name: float64 (n_out, n_in) or (n,)}, {name: type name}) with gguf's dequantizers."""
    data, meta, infos, start = read_gguf_index(path)
    raw = np.frombuffer(data, dtype=np.uint8)
    tensors, types = {}, {}
    for name, shape, t, off in infos:
        qtype = GGMLQuantizationType(t)
        block, size = GGML_QUANT_SIZES[qtype]
        n = int(np.prod(shape))
        w = quants.dequantize(raw[start + off:start + off + n // block * size], qtype)
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        tensors[name] = w.reshape(int(np.prod(shape[1:])), shape[0]) if len(shape) > 1 else w
        types[name] = qtype.name
    return meta, tensors, types


def check_model(driver, path, label, rng):
    meta, tensors, types = read_with_gguf(path)
    ids = rng.integers(0, 300, size=64)
    nll_ref, argmax_ref, logits = reference.forward(meta, tensors, ids[:-1], ids[1:])
    p = subprocess.run([driver, path, "2", "0"] + [str(i) for i in ids], capture_output=True,
                       text=True)
    if not check(p.returncode == 0, "%s: driver exit %d: %s" % (label, p.returncode, p.stderr)):
        return
    rows = np.array([[float(x) for x in line.split()] for line in p.stdout.strip().split("\n")])
    nll, argmax = rows[:, 1], rows[:, 2].astype(int)
    diff = np.abs(nll - nll_ref).max()
    ppl, ppl_ref = np.exp(nll.mean()), np.exp(nll_ref.mean())
    top2 = np.sort(logits, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-3
    bad_argmax = np.nonzero(clear & (argmax != argmax_ref))[0]
    matrix_types = sorted(set(v for k, v in types.items() if tensors[k].ndim == 2))
    print("%-12s %-14s max |nll - ref| %.2e  ppl %.6f (ref %.6f)" %
          (label, "+".join(matrix_types), diff, ppl, ppl_ref))
    check(diff <= NLL_TOL, "%s: max |nll - ref| = %g > %g" % (label, diff, NLL_TOL))
    check(abs(ppl - ppl_ref) / ppl_ref <= PPL_RTOL,
          "%s: ppl %.9g vs reference %.9g" % (label, ppl, ppl_ref))
    check(len(bad_argmax) == 0, "%s: argmax differs at %s" % (label, bad_argmax))
    return types


def made_models(mkmodel, cases, tmp):
    """(label, path) of each case's model, written by evalmesh-mkmodel into tmp (a case it cannot
    make is a failed check, left out)."""
    for label, args in cases:
        path = os.path.join(tmp, label + ".gguf")
        p = subprocess.run([mkmodel] + args + ["--out", path], capture_output=True, text=True)
        if check(p.returncode == 0, "%s: mkmodel: %s" % (label, p.stderr.strip())):
            yield label, path


def main():
    driver, invariance, mkmodel = sys.argv[1:4]
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as tmp:
        for label, path in made_models(mkmodel, CASES, tmp):
            types = check_model(driver, path, label, rng)
            if label == "q4_k_m_tied" and types:
                # llama-quantize's Q4_K_M: Q6_K head (the tied embedding), attn_v and ffn_down of
                # layers 0, 3, 6, 7 of 8 (use_more_bits); Q4_K elsewhere
                want = {"token_embd.weight": "Q6_K", "blk.3.attn_v.weight": "Q6_K",
                        "blk.1.ffn_down.weight": "Q4_K", "blk.7.ffn_down.weight": "Q6_K",
                        "blk.2.attn_q.weight": "Q4_K"}
                for name, t in want.items():
                    check(types[name] == t, "%s: %s is %s, expected %s" %
                          (label, name, types[name], t))
                p = subprocess.run([invariance, path], capture_output=True, text=True)
                print("invariance on %s: %s" % (label, p.stdout.strip()))
                check(p.returncode == 0, "%s: invariance failed: %s" % (label, p.stderr.strip()))
        base = os.path.join(tmp, "f32.gguf")
        p = subprocess.run([mkmodel] + BASE + ["--out", base], capture_output=True, text=True)
        check(p.returncode == 0, "mkmodel: %s" % p.stderr.strip())
        for type_name in RANDOM_TYPES:
            path = os.path.join(tmp, type_name + ".gguf")
            with_random_matrices(base, path, type_name, rng)
            check_model(driver, path, "random " + type_name.lower(), rng)
    sys.exit(finish())


if __name__ == "__main__":
    main()
