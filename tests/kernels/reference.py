"""An independent NumPy reference for the CPU forward: GGUF tensors (read with
tests/support/gguf_reader.py; F32, F16, BF16, Q8_0 and Q4_0 dequantized in NumPy) and a float64
Llama-family forward that returns, for each scored position, -log p(target) and the argmax.
Written from the GGUF, llama.cpp and Hugging Face definitions of each architecture (ARCHS below),
sharing no code with the C side. Architectures llama.cpp runs with NEOX RoPE keep their Q/K rows
in Hugging Face's order in GGUF; this reference rotates those halves as Hugging Face does
(rotate_half) instead of reordering rows as the C loader does."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from gguf_reader import read_gguf_index  # noqa: E402

QK = 32


def dequantize(ggml_type, raw, n_in, n_out):
    """The weight {n_in, n_out} as a float64 array (n_out, n_in)."""
    if ggml_type == 0:
        w = np.frombuffer(raw, dtype="<f4", count=n_in * n_out)
    elif ggml_type == 1:
        w = np.frombuffer(raw, dtype="<f2", count=n_in * n_out)
    elif ggml_type == 30:
        bits = np.frombuffer(raw, dtype="<u2", count=n_in * n_out).astype(np.uint32) << 16
        w = bits.view(np.float32)
    elif ggml_type == 8:
        blocks = np.frombuffer(raw, dtype=np.uint8, count=n_in * n_out // QK * 34).reshape(-1, 34)
        d = blocks[:, :2].copy().view("<f2").astype(np.float64)
        q = blocks[:, 2:].view(np.int8).astype(np.float64)
        w = d * q
    elif ggml_type == 2:
        blocks = np.frombuffer(raw, dtype=np.uint8, count=n_in * n_out // QK * 18).reshape(-1, 18)
        d = blocks[:, :2].copy().view("<f2").astype(np.float64)
        qs = blocks[:, 2:]
        q = np.concatenate([(qs & 0x0F).astype(np.float64), (qs >> 4).astype(np.float64)], axis=1)
        w = d * (q - 8.0)
    else:
        raise ValueError("unsupported ggml type %d" % ggml_type)
    return np.asarray(w, dtype=np.float64).reshape(n_out, n_in)


def read_gguf(path):
    """(metadata dict, {name: float64 array (n_out, n_in) or (n,)}, {name: ggml type})"""
    data, meta, infos, start = read_gguf_index(path)
    data = memoryview(data)  # slices below share the file's bytes instead of copying them
    tensors, types = {}, {}
    for name, shape, t, off in infos:
        n_in = shape[0]
        n_out = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        w = dequantize(t, data[start + off:], n_in, n_out)
        tensors[name] = w if len(shape) > 1 else w.reshape(n_in)
        types[name] = t
    return meta, tensors, types


# Per architecture: NEOX RoPE (rotate halves), per-head q/k norms, post-norms, fused QKV and
# gate/up, embedding scale sqrt(dim), GeGLU, soft-capping defaults (llama.cpp's), the sliding
# layers' pattern (1 every layer, n: l % n < n - 1) and RoPE base, and the layer count at which
# llama.cpp scales scores by 1/sqrt(dim/heads) (Gemma 2/3 27B).
ARCHS = {
    "llama": dict(swa=1),
    "qwen2": dict(neox=True),
    "qwen3": dict(neox=True, qk_norm=True),
    "gemma": dict(neox=True, embed=True, gelu=True),
    "gemma2": dict(neox=True, post=True, embed=True, gelu=True, attn_cap=50.0, final_cap=30.0,
                   swa=2, dim_scale_layers=46),
    "gemma3": dict(neox=True, qk_norm=True, post=True, embed=True, gelu=True, swa=6,
                   swa_base=10000.0, dim_scale_layers=62),
    "phi3": dict(neox=True, fused=True, swa=1),
}


def config(meta):
    a = meta["general.architecture"]
    g = lambda k, d=None: meta.get("%s.%s" % (a, k), d)
    dim, heads = g("embedding_length"), g("attention.head_count")
    head_dim = g("attention.key_length", dim // heads)
    c = dict(dim=dim, layers=g("block_count"), heads=heads,
             kv_heads=g("attention.head_count_kv", heads), head_dim=head_dim,
             rope_dim=g("rope.dimension_count", head_dim), base=g("rope.freq_base", 10000.0),
             eps=g("attention.layer_norm_rms_epsilon", 1e-5),
             scaling=g("rope.scaling.type", None), factor=g("rope.scaling.factor", 0.0),
             low=g("rope.scaling.low_freq_factor", 1.0),
             high=g("rope.scaling.high_freq_factor", 4.0),
             orig=g("rope.scaling.original_context_length",
                    g("context_length") if g("rope.scaling.type") == "yarn" else 8192),
             beta_fast=g("rope.scaling.yarn_beta_fast", 32.0),
             beta_slow=g("rope.scaling.yarn_beta_slow", 1.0))
    if c["scaling"] is None and c["factor"]:
        c["scaling"] = "linear"
    f = ARCHS[a]
    c.update(arch=a, neox=f.get("neox", False), qk_norm=f.get("qk_norm", False),
             post=f.get("post", False), fused=f.get("fused", False), gelu=f.get("gelu", False),
             embed_scale=float(np.float32(np.sqrt(dim))) if f.get("embed") else 1.0,
             attn_cap=g("attn_logit_softcapping", f.get("attn_cap", 0.0)) if "attn_cap" in f else 0.0,
             final_cap=g("final_logit_softcapping", f.get("final_cap", 0.0)) if "final_cap" in f
             else 0.0,
             window=g("attention.sliding_window", 0) if "swa" in f else 0, swa=f.get("swa", 0),
             swa_base=g("rope.freq_base_swa", f.get("swa_base", 0.0)),
             scale_base=dim // heads if c["layers"] == f.get("dim_scale_layers") else head_dim)
    return c


def sliding(c, l):
    """Whether layer l attends through the sliding window."""
    if not c["window"] or not c["swa"]:
        return False
    return c["swa"] == 1 or l % c["swa"] < c["swa"] - 1


def rope_freqs(c, factors=None):
    """The rotation frequencies; factors: the rope_freqs.weight tensor (Llama 3.1 GGUFs)."""
    i = np.arange(c["rope_dim"] // 2, dtype=np.float64)
    f = c["base"] ** (-2.0 * i / c["rope_dim"])
    if c["scaling"] == "linear" and c["factor"] and c["factor"] != 1.0:
        f = f / c["factor"]
    elif c["scaling"] == "llama3":
        factor = c["factor"] or 8.0
        wavelen = 2 * np.pi / f
        smooth = (c["orig"] / wavelen - c["low"]) / (c["high"] - c["low"])
        blended = (1 - smooth) * f / factor + smooth * f
        f = np.where(wavelen < c["orig"] / c["high"], f,
                     np.where(wavelen > c["orig"] / c["low"], f / factor, blended))
    elif c["scaling"] == "yarn":
        # ggml's rope_yarn: pairs below the corrected range keep f, above it take f / factor
        d, base = c["rope_dim"], c["base"]
        pair = lambda rot: d * np.log(c["orig"] / (rot * 2 * np.pi)) / (2 * np.log(base))
        low = max(0.0, np.floor(pair(c["beta_fast"])))
        high = min(d - 1.0, np.ceil(pair(c["beta_slow"])))
        keep = 1 - np.clip((i - low) / max(0.001, high - low), 0, 1)
        f = f / c["factor"] * (1 - keep) + f * keep
    if factors is not None:
        f = f / factors.astype(np.float64)
    return f


def rope_magnitude(c):
    """What cos and sin are multiplied by: YaRN's attention temperature, else 1."""
    if c["scaling"] == "yarn" and c["factor"] > 1:
        return 1 + 0.1 * np.log(c["factor"])
    return 1.0


def rope(x, n_heads, c, factors=None):
    """x (T, n_heads*head_dim): rotate adjacent pairs of the first rope_dim dims of each head, or
    with c["neox"] the pairs (i, i + rope_dim/2) (Hugging Face's rotate_half)."""
    T, half = x.shape[0], c["rope_dim"] // 2
    x = x.reshape(T, n_heads, c["head_dim"]).copy()
    ang = np.arange(T, dtype=np.float64)[:, None] * rope_freqs(c, factors)[None, :]  # (T, rope_dim/2)
    m = rope_magnitude(c)
    cos, sin = m * np.cos(ang)[:, None, :], m * np.sin(ang)[:, None, :]
    if c["neox"]:
        first, second = slice(0, half), slice(half, 2 * half)
    else:
        first, second = slice(0, c["rope_dim"], 2), slice(1, c["rope_dim"], 2)
    a, b = x[:, :, first].copy(), x[:, :, second].copy()
    x[:, :, first] = a * cos - b * sin
    x[:, :, second] = a * sin + b * cos
    return x.reshape(T, -1)


def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * w


def softcap(x, cap):
    return cap * np.tanh(x / cap) if cap else x


def forward(meta, t, tokens_in, targets, inputs=None, product=None):
    """-log p(target) and argmax at every position of one window (float64). With a dict `inputs`,
    also the input (T, columns) of every linear weight, by the weight's name. product(x, name):
    the product x W^T of the linear weight `name` (default: in float64)."""
    mm = product or (lambda x, name: x @ t[name].T)

    def keep(names, x):
        if inputs is not None:
            inputs.update({n: x for n in names})

    c = config(meta)
    T, H, KV, hd = len(tokens_in), c["heads"], c["kv_heads"], c["head_dim"]
    x = t["token_embd.weight"][tokens_in] * c["embed_scale"]  # (T, D)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    causal = np.where(j <= i, 0.0, -np.inf)
    windowed = np.where((j <= i) & (i - j < max(c["window"], 1)), 0.0, -np.inf)
    local = dict(c, base=c["swa_base"], scaling=None) if c["swa_base"] else c
    for l in range(c["layers"]):
        p = "blk.%d." % l
        xn = rmsnorm(x, t[p + "attn_norm.weight"], c["eps"])
        keep([p + n + ".weight" for n in ("attn_q", "attn_k", "attn_v", "attn_qkv")], xn)
        if c["fused"]:  # Q, K, V rows of one projection
            q, k, v = np.split(mm(xn, p + "attn_qkv.weight"), [H * hd, (H + KV) * hd], axis=1)
        else:
            q, k, v = (mm(xn, p + n + ".weight") for n in ("attn_q", "attn_k", "attn_v"))
        if p + "attn_q.bias" in t:
            q, k, v = q + t[p + "attn_q.bias"], k + t[p + "attn_k.bias"], v + t[p + "attn_v.bias"]
        if c["qk_norm"]:  # RMSNorm of every head
            q = rmsnorm(q.reshape(-1, hd), t[p + "attn_q_norm.weight"], c["eps"]).reshape(T, -1)
            k = rmsnorm(k.reshape(-1, hd), t[p + "attn_k_norm.weight"], c["eps"]).reshape(T, -1)
        slides = sliding(c, l)
        factors = t.get("rope_freqs.weight")
        rc = local if slides else c
        q, k = rope(q, H, rc, factors if rc is c else None), rope(k, KV, rc, factors if rc is c else None)
        mask = windowed if slides else causal
        out = np.zeros((T, H * hd))
        for h in range(H):
            g = h // (H // KV)
            qh, kh, vh = q[:, h * hd:(h + 1) * hd], k[:, g * hd:(g + 1) * hd], v[:, g * hd:(g + 1) * hd]
            s = softcap(qh @ kh.T / np.sqrt(c["scale_base"]), c["attn_cap"]) + mask  # (T, T)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, h * hd:(h + 1) * hd] = (s / s.sum(axis=1, keepdims=True)) @ vh
        keep([p + "attn_output.weight"], out)
        att = mm(out, p + "attn_output.weight")
        x = x + (rmsnorm(att, t[p + "attn_post_norm.weight"], c["eps"]) if c["post"] else att)
        xn = rmsnorm(x, t[p + "ffn_norm.weight"], c["eps"])
        keep([p + "ffn_gate.weight", p + "ffn_up.weight"], xn)
        if c["fused"]:  # gate rows, then up rows
            gate, up = np.split(mm(xn, p + "ffn_up.weight"), 2, axis=1)
        else:
            gate, up = mm(xn, p + "ffn_gate.weight"), mm(xn, p + "ffn_up.weight")
        if c["gelu"]:
            act = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate ** 3)))
        else:
            act = gate / (1 + np.exp(-gate))
        keep([p + "ffn_down.weight"], act * up)
        mlp = mm(act * up, p + "ffn_down.weight")
        x = x + (rmsnorm(mlp, t[p + "ffn_post_norm.weight"], c["eps"]) if c["post"] else mlp)
    xn = rmsnorm(x, t["output_norm.weight"], c["eps"])
    head = "output.weight" if "output.weight" in t else "token_embd.weight"
    logits = softcap(mm(xn, head), c["final_cap"])  # (T, vocab)
    m = logits.max(axis=1, keepdims=True)
    logz = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    nll = logz - logits[np.arange(T), targets]
    return nll, logits.argmax(axis=1), logits
