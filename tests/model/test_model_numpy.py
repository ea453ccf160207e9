"""An independent NumPy reader of GGUF and safetensors files checks evalmesh's loader and model
maker: for models written by evalmesh-mkmodel (every type) and for stories260K.gguf, the tensors
(names, types, shapes, SHA-256 of the bytes) and hyperparameters it reads equal what
em_model_load gives (printed by model_dump); the safetensors files hold the same weights as the
GGUF files once the Q/K rows are put back in GGUF order; and the weights are exactly the
documented splitmix64 values.

usage: test_model_numpy.py MKMODEL MODEL_DUMP
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from gguf_reader import read_gguf_index  # noqa: E402

# ggml type id: (name, values per block, bytes per block)
GGML_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 8: ("Q8_0", 32, 34),
              30: ("BF16", 1, 2)}

from checks import check, finish  # noqa: E402


def read_gguf(path):
    """Returns (metadata dict, {name: (type name, shape, bytes)}, data offset, file bytes)."""
    data, meta, infos, start = read_gguf_index(path)
    tensors = {}
    for name, shape, t, off in infos:
        tname, block, block_bytes = GGML_TYPES[t]
        nbytes = int(np.prod(shape)) // block * block_bytes
        tensors[name] = (tname, shape, data[start + off:start + off + nbytes])
    return meta, tensors, start, data


def read_safetensors(path):
    """Returns {name: (dtype, shape outermost first, bytes)} and the header bytes."""
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[name] = (v["dtype"], v["shape"], data[8 + n + b:8 + n + e])
    return out, data[:8 + n]


HF_LAYER = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
            "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
            "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias",
            "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
            "post_attention_layernorm.weight": "ffn_norm.weight",
            "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
            "mlp.down_proj.weight": "ffn_down.weight"}
HF_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}


def gguf_name(hf):
    if hf in HF_GLOBAL:
        return HF_GLOBAL[hf]
    parts = hf.split(".", 3)  # model, layers, N, rest
    return "blk.%s.%s" % (parts[2], HF_LAYER[parts[3]])


def hf_to_gguf_rows(x, n_heads):
    """llama.cpp's permute: rows of each head from (half, i) order to (i, half) order."""
    shape = x.shape
    return x.reshape(n_heads, 2, shape[0] // n_heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


NP_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def st_as_gguf(st, config):
    """The safetensors tensors with GGUF names and GGUF row order, as raw bytes, plus 1-D
    tensors converted to F32 as the loader does."""
    out = {}
    for hf, (dtype, shape, raw) in st.items():
        name = gguf_name(hf)
        a = np.frombuffer(raw, dtype=NP_DTYPES[dtype]).reshape(shape)
        if name.endswith(("attn_q.weight", "attn_q.bias")):
            a = hf_to_gguf_rows(a, config["num_attention_heads"])
        if name.endswith(("attn_k.weight", "attn_k.bias")):
            a = hf_to_gguf_rows(a, config["num_key_value_heads"])
        if len(shape) == 1 and dtype != "F32":
            a = (a.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else a.astype(np.float32)
            dtype = "F32"
        out[name] = (dtype, list(reversed(shape)), np.ascontiguousarray(a).tobytes())
    return out


def gguf_as_loaded(meta, tensors):
    """qwen2 GGUF files hold Q/K rows in rotate-half order; em_model uses adjacent pairs."""
    if meta["general.architecture"] != "qwen2":
        return tensors
    out = dict(tensors)
    for name, (tname, shape, raw) in tensors.items():
        if name.endswith(("attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias")):
            heads = meta["qwen2.attention.head_count" + ("" if ".attn_q." in name else "_kv")]
            a = np.frombuffer(raw, dtype=np.float32).reshape(list(reversed(shape)))
            out[name] = (tname, shape, np.ascontiguousarray(hf_to_gguf_rows(a, heads)).tobytes())
    return out


def dump(model_dump, path):
    return json.loads(subprocess.run([model_dump, path], check=True, capture_output=True).stdout)


def compare_with_dump(tensors, d, what):
    check(len(tensors) == len(d["tensors"]), "%s: %d tensors vs %d" % (what, len(tensors), len(d["tensors"])))
    for t in d["tensors"]:
        mine = tensors.get(t["name"])
        check(mine is not None, "%s: %s missing" % (what, t["name"]))
        if mine is None:
            continue
        tname, shape, raw = mine
        check(tname == t["type"], "%s: %s type %s vs %s" % (what, t["name"], tname, t["type"]))
        check(list(shape) == t["shape"], "%s: %s shape %s vs %s" % (what, t["name"], shape, t["shape"]))
        check(len(raw) == t["nbytes"], "%s: %s bytes" % (what, t["name"]))
        check(hashlib.sha256(raw).hexdigest() == t["sha256"], "%s: %s data differs" % (what, t["name"]))


def splitmix_weights(seed, name, fan_in, n):
    """random_weights.h for a matrix: (2u - 1) * sqrt(3 / fan_in) in float32."""
    h = 14695981039346656037
    for ch in name.encode():
        h = ((h ^ ch) * 1099511628211) & (2**64 - 1)
    gamma = 0x9E3779B97F4A7C15
    with np.errstate(over="ignore"):
        state = np.uint64(seed ^ h) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(gamma)
        z = state
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) / np.float32(16777216.0)
    scale = np.sqrt(np.float32(3.0) / np.float32(fan_in))
    return (np.float32(2.0) * u - np.float32(1.0)) * scale


def main():
    mkmodel, model_dump = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="em-numpy-")
    # Llama 3.1 frequency factors as llama.cpp's converter computes them
    freqs = os.path.join(tmp, "freqs.gguf")
    subprocess.run([mkmodel, "--out", freqs, "--rope-scaling", "llama3", "--rope-factor", "32",
                    "--rope-theta", "500000", "--rope-freqs", "--dim", "256", "--heads", "2"], check=True)
    meta, tensors, _, _ = read_gguf(freqs)
    check("llama.rope.scaling.type" not in meta, "rope_freqs replaces the scaling keys")
    compare_with_dump(tensors, dump(model_dump, freqs), freqs)
    got = np.frombuffer(tensors["rope_freqs.weight"][2], dtype=np.float32)
    d = 128
    want = []
    for f in 1.0 / (500000.0 ** (np.arange(0, d, 2) / d)):
        wavelen = 2 * np.pi / f
        if wavelen < 8192 / 4.0:
            want.append(1.0)
        elif wavelen > 8192 / 1.0:
            want.append(32.0)
        else:
            smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
            want.append(1 / ((1 - smooth) / 32.0 + smooth))
    want = np.array(want, dtype=np.float32)
    check(got.shape == (64,) and np.allclose(got, want, rtol=1e-6, atol=0), "rope_freqs values")
    check(got[0] == 1.0 and got[-1] == 32.0, "rope_freqs: 1 for the fastest pair, the factor for the slowest")
    check(np.any((got > 1.0) & (got < 32.0)), "rope_freqs has smoothed entries")

    # the qwen2 architecture (F32, so the NumPy side can permute values)
    qwen = os.path.join(tmp, "qwen2.gguf")
    subprocess.run([mkmodel, "--out", qwen, "--qwen2", "--kv-heads", "2"], check=True)
    meta, tensors, _, _ = read_gguf(qwen)
    check(meta["general.architecture"] == "qwen2", "qwen2 architecture")
    compare_with_dump(gguf_as_loaded(meta, tensors), dump(model_dump, qwen), qwen)

    for t in ["f32", "f16", "bf16", "q8_0", "q4_0"]:
        gguf = os.path.join(tmp, "m-%s.gguf" % t)
        extra = ["--qkv-bias", "--kv-heads", "2", "--seed", "42"]
        subprocess.run([mkmodel, "--out", gguf, "--type", t] + extra, check=True)
        meta, tensors, start, data = read_gguf(gguf)
        d = dump(model_dump, gguf)
        compare_with_dump(tensors, d, gguf)
        c = d["config"]
        check(meta["general.architecture"] == c["architecture"] == "llama", "architecture")
        for key, field in [("embedding_length", "dim"), ("block_count", "n_layers"),
                           ("feed_forward_length", "ffn_dim"), ("attention.head_count", "n_heads"),
                           ("attention.head_count_kv", "n_kv_heads"), ("context_length", "n_ctx_train"),
                           ("vocab_size", "n_vocab"), ("rope.dimension_count", "rope_dim")]:
            check(meta["llama." + key] == c[field], "%s: llama.%s %s vs %s" % (t, key, meta["llama." + key], c[field]))
        check(np.float32(meta["llama.attention.layer_norm_rms_epsilon"]) == np.float32(c["rms_eps"]), "rms eps")
        check(c["has_qkv_bias"] and not c["tied_output"], "bias / tied")
        check(len(meta["tokenizer.ggml.tokens"]) == 258 and meta["tokenizer.ggml.model"] == "gpt2", "vocab")
        check(d["header_sha256"] == hashlib.sha256(data[:start]).hexdigest(), "%s header sha256" % t)
        if t == "f32":
            name = "blk.1.attn_k.weight"
            want = splitmix_weights(42, name, 64, 64 * 32)
            got = np.frombuffer(tensors[name][2], dtype=np.float32)
            check(np.array_equal(want, got), "splitmix64 weights of %s" % name)
        if t in ("f32", "f16", "bf16"):
            st_dir = os.path.join(tmp, "st-%s" % t)
            subprocess.run([mkmodel, "--out", st_dir, "--format", "safetensors", "--type", t] + extra, check=True)
            config = json.load(open(os.path.join(st_dir, "config.json")))
            st, st_header = read_safetensors(os.path.join(st_dir, "model.safetensors"))
            converted = st_as_gguf(st, config)
            compare_with_dump(converted, d, st_dir + " (as GGUF)")
            sd = dump(model_dump, st_dir)
            check(sd["header_sha256"] == hashlib.sha256(st_header).hexdigest(), "st header sha256")
            compare_with_dump(converted, sd, st_dir)

    shared = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
    stories = os.path.join(shared, "models", "stories260K.gguf")
    if os.path.exists(stories):
        meta, tensors, start, data = read_gguf(stories)
        d = dump(model_dump, stories)
        compare_with_dump(tensors, d, stories)
        check(len(tensors) == 48, "stories: 48 tensors")
        check(d["header_sha256"] == hashlib.sha256(data[:start]).hexdigest(), "stories header sha256")
        check(meta["llama.embedding_length"] == 64 and meta["llama.feed_forward_length"] == 172, "stories dims")
        out = os.path.join(tmp, "stories-st")
        subprocess.run([mkmodel, "--from", stories, "--out", out], check=True)
        config = json.load(open(os.path.join(out, "config.json")))
        check(config["num_key_value_heads"] == 4 and config["vocab_size"] == 512, "stories config.json")
        st, _ = read_safetensors(os.path.join(out, "model.safetensors"))
        compare_with_dump(st_as_gguf(st, config), d, "stories export")
    else:
        print("note: %s absent, stories checks skipped" % stories)

    subprocess.run(["rm", "-rf", tmp])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
