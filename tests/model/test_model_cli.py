"""The command-line side of model files: `evalmesh inspect` (text and --json, bad files, any
well-formed GGUF described with its `runnable:` verdict: vocabulary-only files, unknown
architectures, tensor types and pre-tokenizers, the real SmolLM2 when it can be fetched),
the `model` stage in recipes (paths relative to the recipe, format and checksum checks, errors
naming file:line:col or rank and stage), NaN and infinite weights named by tensor and block and evalmesh-mkmodel's argument errors.

usage: test_model_cli.py MKMODEL   (EVALMESH_BIN names the evalmesh binary)
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402


def run(args, cwd=None):
    p = subprocess.run(args, capture_output=True, text=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def gguf_layout(path):
    """The start of a GGUF file's tensor data and each tensor's absolute offset, found by walking
    the header (alignment 32, as the files these tests read use)."""
    data = open(path, "rb").read()
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(t, pos):
        if t == 8:
            return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(n):
                pos = skip_value(et, pos)
            return pos
        return pos + sizes[t]

    for _ in range(n_kv):
        pos = skip_value(8, pos)
        t = struct.unpack_from("<I", data, pos)[0]
        pos = skip_value(t, pos + 4)
    offsets = {}
    for _ in range(n_tensors):
        name_len = struct.unpack_from("<Q", data, pos)[0]
        name = data[pos + 8:pos + 8 + name_len].decode()
        pos = skip_value(8, pos)
        n_dims = struct.unpack_from("<I", data, pos)[0]
        offsets[name] = struct.unpack_from("<Q", data, pos + 4 + 8 * n_dims + 4)[0]
        pos += 4 + 8 * n_dims + 4 + 8
    start = (pos + 31) // 32 * 32
    return start, {name: start + off for name, off in offsets.items()}


def gguf_header_sha(path):
    """SHA-256 of a GGUF file up to its tensor data."""
    start, _ = gguf_layout(path)
    return hashlib.sha256(open(path, "rb").read()[:start]).hexdigest()


def check_inspect(evalmesh, mkmodel, tmp):
    shared = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
    stories = os.path.join(shared, "models", "stories260K.gguf")
    if os.path.exists(stories):
        rc, out, err = run([evalmesh, "inspect", stories])
        check(rc == 0, "inspect stories: rc %d %s" % (rc, err))
        lines = out.splitlines()
        for want in ["format:       gguf", "architecture: llama", "file size:    1185376 bytes",
                     "header sha256: " + gguf_header_sha(stories),
                     "  embedding_length    64", "  feed_forward_length 172", "  block_count         5",
                     "  head_count          8", "  head_count_kv       4", "  vocab_size          512",
                     "  rope_freq_base      10000", "  rms_epsilon         1e-05",
                     'tokenizer: llama, 512 tokens, bos 1 "<s>", eos 2 "</s>"', "tensors: 48",
                     "  blk.0.ffn_down.weight            F32   172 x 64                  44032"]:
            check(want in lines, "inspect stories: line %r missing" % want)
        check(lines[-2:] == ["tensors by type: F32 48", "runnable: yes"],
              "inspect stories: last lines %r" % lines[-2:])
    else:
        print("note: %s absent, stories inspect skipped" % stories)

    model = os.path.join(tmp, "m.gguf")
    subprocess.run([mkmodel, "--out", model, "--type", "f16", "--dim", "128", "--heads", "8",
                    "--kv-heads", "2", "--layers", "3", "--ffn", "320", "--vocab", "300",
                    "--rope-scaling", "llama3", "--rope-factor", "32", "--rope-theta", "500000",
                    "--ctx", "8192", "--tied"], check=True)
    rc, out, err = run([evalmesh, "inspect", model, "--json"])
    check(rc == 0, "inspect --json: rc %d %s" % (rc, err))
    j = json.loads(out)
    h = j["hyperparameters"]
    want = {"vocab_size": 300, "context_length": 8192, "embedding_length": 128, "block_count": 3,
            "feed_forward_length": 320, "head_count": 8, "head_count_kv": 2, "head_dim": 16,
            "rope_dimension": 16, "rope_freq_base": 500000, "rope_scaling": "llama3",
            "rope_llama3_factor": 32, "rope_llama3_low_freq_factor": 1,
            "rope_llama3_high_freq_factor": 4, "rope_llama3_original_context": 8192,
            "qkv_bias": False, "tied_output": True}
    for k, v in want.items():
        check(h.get(k) == v, "inspect --json: %s = %r, want %r" % (k, h.get(k), v))
    check(j["format"] == "gguf" and j["architecture"] == "llama", "format/architecture")
    check(j["file_size"] == os.path.getsize(model), "file_size")
    check(j["header_sha256"] == gguf_header_sha(model), "header sha256")
    check(j["tokenizer"] == {"kind": "gpt2", "vocab_size": 300, "bos": 256, "eos": 257}, "tokenizer %r" % j["tokenizer"])
    tensors = {t["name"]: t for t in j["tensors"]}
    check(len(tensors) == 2 + 9 * 3, "tensor count %d" % len(tensors))
    check("output.weight" not in tensors, "tied: no output.weight")
    check(tensors["blk.2.attn_k.weight"] == {"name": "blk.2.attn_k.weight", "type": "F16",
                                             "shape": [128, 32], "bytes": 128 * 32 * 2},
          "attn_k entry %r" % tensors["blk.2.attn_k.weight"])
    check(tensors["blk.0.ffn_norm.weight"]["type"] == "F32", "norms are F32")
    check(h["rope_freqs_tensor"] is False, "no rope_freqs tensor")

    freqs = os.path.join(tmp, "freqs.gguf")
    subprocess.run([mkmodel, "--out", freqs, "--rope-scaling", "llama3", "--rope-freqs"], check=True)
    rc, out, err = run([evalmesh, "inspect", freqs])
    check(rc == 0 and "  rope_freqs          rope_freqs.weight (frequency factors)" in out.splitlines()
          and "  rope_scaling        none" in out.splitlines(), "inspect rope_freqs: %s" % out)

    # the same through a safetensors checkpoint
    st = os.path.join(tmp, "m-st")
    subprocess.run([mkmodel, "--out", st, "--format", "safetensors", "--type", "f16", "--dim", "128",
                    "--heads", "8", "--kv-heads", "2", "--layers", "3", "--ffn", "320", "--vocab",
                    "300", "--rope-scaling", "llama3", "--rope-factor", "32", "--rope-theta",
                    "500000", "--ctx", "8192", "--tied"], check=True)
    rc, out, err = run([evalmesh, "inspect", st, "--json"])
    check(rc == 0, "inspect safetensors: rc %d %s" % (rc, err))
    js = json.loads(out)
    check(js["format"] == "safetensors", "safetensors format")
    check(js["hyperparameters"] == j["hyperparameters"], "same hyperparameters from both formats")
    check(sorted(t["name"] for t in js["tensors"]) == sorted(tensors), "same tensor names")

    # bad files: one message, exit status 2
    cut = os.path.join(tmp, "cut.gguf")
    with open(model, "rb") as f:
        open(cut, "wb").write(f.read(1000))
    rc, out, err = run([evalmesh, "inspect", cut])
    check(rc == 2 and "cut.gguf: truncated or corrupt metadata key 19 (tokenizer.ggml.tokens)" in err,
          "inspect cut file: %d %s" % (rc, err))
    check(out == "", "nothing on stdout for a bad file")
    rc, out, err = run([evalmesh, "inspect"])
    check(rc == 2 and "missing MODEL" in err, "inspect without a model")
    rc, out, err = run([evalmesh, "inspect", model, "--yaml"])
    check(rc == 2 and "unknown option '--yaml'" in err, "inspect bad option: %s" % err)
    rc, out, err = run([evalmesh, "inspect", "--jsn", model])
    check(rc == 2 and "error: evalmesh inspect: unknown option '--jsn' (did you mean '--json'?)"
          in err, "inspect --jsn: %s" % err)
    rc, out, err = run([evalmesh, "inspect", model, "extra"])
    check(rc == 2 and "evalmesh inspect: unexpected argument 'extra'" in err,
          "inspect two models: %s" % err)
    text = os.path.join(tmp, "notes.txt")
    open(text, "w").write("hello")
    rc, out, err = run([evalmesh, "inspect", text])
    check(rc == 2 and "notes.txt: not a model file" in err, "inspect a text file: %s" % err)


def check_stage(evalmesh, mkmodel, tmp):
    rdir = os.path.join(tmp, "recipes")
    os.makedirs(os.path.join(rdir, "models"))
    model = os.path.join(rdir, "models", "tiny.gguf")
    subprocess.run([mkmodel, "--out", model], check=True)
    sha = gguf_header_sha(model)

    def recipe(name, stage):
        path = os.path.join(rdir, name + ".yaml")
        open(path, "w").write("name: %s\nstages:\n  m: %s\n" % (name, stage))
        return path

    good = recipe("good", "{kind: model, path: models/tiny.gguf, header_sha256: %s}" % sha)
    # run from another directory: the path is relative to the recipe, not the working directory
    rc, out, err = run([evalmesh, "run", good, "--run-dir", os.path.join(tmp, "run-good")], cwd="/")
    check(rc == 0, "model stage run: %d %s" % (rc, err))
    check("model m: gguf llama, 2 layers, dim 64, 4/4 heads, vocab 258, 21 tensors" in out + err,
          "model stage log line: %s" % (out + err))

    missing = recipe("missing", "{kind: model, path: models/none.gguf}")
    rc, out, err = run([evalmesh, "validate", missing])
    check(rc == 2 and "missing.yaml:3:26: stage 'm': path %s/models/none.gguf: No such file or "
          "directory" % rdir in err, "missing model: %d %s" % (rc, err))

    wrong = recipe("wrong", "{kind: model, path: models/tiny.gguf, format: safetensors}")
    rc, out, err = run([evalmesh, "run", wrong, "--run-dir", os.path.join(tmp, "run-wrong")])
    check(rc == 2 and "rank 0, stage 'm' (model): %s is a gguf model but the stage says format: "
          "safetensors" % model in err, "format mismatch: %d %s" % (rc, err))

    pinned = recipe("pinned", "{kind: model, path: models/tiny.gguf, header_sha256: '%s'}" % ("0" * 64))
    rc, out, err = run([evalmesh, "run", pinned, "--run-dir", os.path.join(tmp, "run-pinned")])
    check(rc == 2 and "header sha256 is %s but the stage expects %s" % (sha, "0" * 64) in err,
          "checksum mismatch: %d %s" % (rc, err))
    # the digest pins the weights too: xxhsum's XXH3-128 of the file passes, another is refused
    digest = subprocess.run(["xxhsum", "-H2", model], capture_output=True, text=True,
                            check=True).stdout.split()[0]
    pinned = recipe("pinned-digest", "{kind: model, path: models/tiny.gguf, digest: %s}" % digest)
    rc, out, err = run([evalmesh, "run", pinned, "--run-dir", os.path.join(tmp, "run-digest")])
    check(rc == 0, "digest pinned: %d %s" % (rc, err))
    pinned = recipe("pinned-other", "{kind: model, path: models/tiny.gguf, digest: '%s'}" % ("0" * 32))
    rc, out, err = run([evalmesh, "run", pinned, "--run-dir", os.path.join(tmp, "run-other")])
    check(rc == 2 and "%s: digest is %s but the stage expects %s" % (model, digest, "0" * 32) in err,
          "digest mismatch: %d %s" % (rc, err))

    typo = recipe("typo", "{kind: model, path: models/tiny.gguf, fromat: gguf}")
    rc, out, err = run([evalmesh, "validate", typo])
    check(rc == 2 and "typo.yaml:3" in err and "fromat" in err, "unknown option: %d %s" % (rc, err))

    cut = os.path.join(rdir, "models", "cut.gguf")
    with open(model, "rb") as f:
        open(cut, "wb").write(f.read(500))
    bad = recipe("bad", "{kind: model, path: models/cut.gguf}")
    rc, out, err = run([evalmesh, "run", bad, "--run-dir", os.path.join(tmp, "run-bad")])
    check(rc == 2 and "rank 0, stage 'm' (model): %s: truncated or corrupt: 21 tensors" % cut in err,
          "truncated model in a run: %d %s" % (rc, err))


def check_non_finite(evalmesh, mkmodel, tmp):
    """A NaN or infinity planted in a known block of a named tensor is named, with its block and
    row, by `inspect` (exit 2) and by the model stage (exit 4, rank and stage), in an F32 tensor
    and in a Q8_0 block whose scale is NaN; check_finite: false lets the run through."""
    shared = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
    stories = os.path.join(shared, "models", "stories260K.gguf")
    cases = []
    if os.path.exists(stories):
        # blk.2.attn_k.weight is {64, 32} F32: value 100 is row 1, value 36, block 100
        f32 = os.path.join(tmp, "inf-f32.gguf")
        shutil.copy(stories, f32)
        cases.append((f32, "blk.2.attn_k.weight", 100 * 4, struct.pack("<f", float("inf")),
                      "tensor 'blk.2.attn_k.weight' (F32): block 100 (row 1, value 36) holds a "
                      "non-finite value (inf)"))
    else:
        print("stories260K.gguf not found: F32 case skipped")
    # blk.1.ffn_up.weight of this model is {64, 256} Q8_0 (34-byte blocks of 32 values, an f16
    # scale first): block 5 is row 2, values 32..63; 0x7e00 is an f16 NaN
    q8 = os.path.join(tmp, "nan-q8_0.gguf")
    subprocess.run([mkmodel, "--out", q8, "--type", "q8_0"], check=True)
    cases.append((q8, "blk.1.ffn_up.weight", 5 * 34, struct.pack("<H", 0x7E00),
                  "tensor 'blk.1.ffn_up.weight' (Q8_0): block 5 (row 2, values 32..63) holds a "
                  "non-finite value (nan)"))
    for path, tensor, at, planted, message in cases:
        clean = path + ".clean.gguf"
        shutil.copy(path, clean)
        with open(path, "r+b") as f:
            f.seek(gguf_layout(path)[1][tensor] + at)
            f.write(planted)
        rc, out, err = run([evalmesh, "inspect", clean])
        check(rc == 0, "inspect of the clean %s: %d %s" % (os.path.basename(path), rc, err))
        rc, out, err = run([evalmesh, "inspect", path])
        check(rc == 2 and "error: %s: %s" % (path, message) in err and "runnable:" in out,
              "inspect names the non-finite value: %d %s" % (rc, err))
        for extra, want_rc in [("", 4), (", check_finite: true", 4), (", check_finite: false", 0),
                               (", mmap: false", 4)]:
            recipe = os.path.join(tmp, "nonfinite.yaml")
            open(recipe, "w").write("name: nonfinite\nstages:\n  m: {kind: model, path: %s%s}\n"
                                    % (path, extra))
            rdir = os.path.join(tmp, "run-nonfinite-%d-%d" % (len(extra), len(os.listdir(tmp))))
            rc, out, err = run([evalmesh, "run", recipe, "--run-dir", rdir])
            want = "rank 0, stage 'm' (model): %s: %s" % (path, message)
            check(rc == want_rc and ((want in err) == (want_rc == 4)),
                  "model stage%s: exit %d (want %d) %s" % (extra, rc, want_rc, err[-600:]))


def check_in_memory(evalmesh, mkmodel, tmp):
    """`mmap: false` reads the weights into memory of the rank's own: a GGUF file and a safetensors
    checkpoint load with the digest `inspect` gives (every byte the same as mapped), and a value
    that is not a boolean is refused naming file:line:col (exit 2)."""
    gguf = os.path.join(tmp, "in-memory.gguf")
    folder = os.path.join(tmp, "in-memory-hf")
    subprocess.run([mkmodel, "--out", gguf, "--type", "q8_0"], check=True)
    subprocess.run([mkmodel, "--format", "safetensors", "--out", folder], check=True,
                   capture_output=True)
    for path in (gguf, folder):
        rc, out, err = run([evalmesh, "inspect", path])
        digest = [l.split()[1] for l in out.splitlines() if l.startswith("digest:")]
        check(rc == 0 and len(digest) == 1, "inspect gives the digest of %s: %s" % (path, err))
        recipe = os.path.join(tmp, "in-memory.yaml")
        open(recipe, "w").write("name: in-memory\nstages:\n  m: {kind: model, path: %s, mmap: false,"
                                " digest: %s}\n" % (path, digest[0] if digest else "0" * 32))
        rdir = os.path.join(tmp, "run-in-memory-%d" % len(os.listdir(tmp)))
        rc, out, err = run([evalmesh, "run", recipe, "--run-dir", rdir])
        check(rc == 0, "mmap: false loads %s with its digest: %d %s" % (path, rc, err[-600:]))
    open(recipe, "w").write("name: in-memory\nstages:\n  m: {kind: model, path: %s, mmap: \"no\"}\n"
                            % gguf)
    rc, out, err = run([evalmesh, "run", recipe, "--run-dir", os.path.join(tmp, "run-bad-mmap")])
    check(rc == 2 and "%s:3:" % recipe in err and
          "stage 'm': option 'mmap' must be a boolean, got a string \"no\"" in err,
          "mmap: \"no\" refused: %d %s" % (rc, err))


def check_not_regular(evalmesh, mkmodel, tmp):
    """A FIFO, a directory or a device where a model or tokenizer file belongs: one message naming
    the path and what it is, exit status 2, and no wait for a writer that never comes (the timeout
    turns a blocking open into a failed check instead of a hung test)."""
    def bounded(args):
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return None, "", "timed out: blocked"
        return p.returncode, p.stdout, p.stderr

    def inspect(path):
        return bounded([evalmesh, "inspect", path])

    fifo = os.path.join(tmp, "pipe.gguf")
    os.mkfifo(fifo)
    rc, out, err = inspect(fifo)
    check(rc == 2 and err == "error: cannot read '%s': it is a FIFO, not a regular file (a model "
          "must be one)\n" % fifo,
          "FIFO as a GGUF model: %s %s" % (rc, err))
    check(out == "", "nothing on stdout for a FIFO")
    recipe = os.path.join(tmp, "fifo.yaml")
    open(recipe, "w").write("name: fifo\nstages:\n  m: {kind: model, path: pipe.gguf}\n")
    rc, out, err = bounded([evalmesh, "run", recipe, "--run-dir", os.path.join(tmp, "run-fifo")])
    # refused when the recipe is checked, before any rank opens it
    check(rc == 2 and "%s:3:26: stage 'm': path %s: not a regular file" % (recipe, fifo) in err,
          "FIFO as the model of a run: %s %s" % (rc, err))
    rc, out, err = inspect("/dev/null")
    check(rc == 2 and "cannot read '/dev/null': it is a character device, not a regular file" in err,
          "device as a model: %s %s" % (rc, err))

    # the same FIFO as a tokenizer, and a folder whose tokenizer.json is a FIFO
    rc, out, err = bounded([evalmesh, "tokenize", fifo, "hello"])
    check(rc == 2 and err == "tokenize: cannot read '%s': it is a FIFO, not a regular file (a "
          "tokenizer must be one)\n" % fifo, "FIFO as a tokenizer: %s %s" % (rc, err))
    tokdir = os.path.join(tmp, "fifo-tok")
    os.mkdir(tokdir)
    os.mkfifo(os.path.join(tokdir, "tokenizer.json"))
    rc, out, err = bounded([evalmesh, "tokenize", tokdir, "hello"])
    check(rc == 2 and "cannot read '%s/tokenizer.json': it is a FIFO, not a regular file" % tokdir
          in err, "FIFO as tokenizer.json: %s %s" % (rc, err))

    # a checkpoint folder whose weights file is a FIFO, named directly (the safetensors reader)
    ckpt = os.path.join(tmp, "fifo-st")
    subprocess.run([mkmodel, "--out", ckpt, "--format", "safetensors"], check=True)
    weights = os.path.join(ckpt, "model.safetensors")
    os.remove(weights)
    os.mkfifo(weights)
    rc, out, err = inspect(weights)
    check(rc == 2 and "cannot read '%s': it is a FIFO, not a regular file (a safetensors file "
          "must be one)" % weights in err,
          "FIFO as a safetensors file: %s %s" % (rc, err))
    # read into memory (--no-mmap) instead of mapped: the same refusal, without blocking
    rc, out, err = bounded([evalmesh, "generate", "-m", weights, "-p", "x", "--no-mmap"])
    check(rc == 2 and err == "evalmesh generate: cannot read '%s': it is a FIFO, not a regular "
          "file (a safetensors file must be one)\n" % weights,
          "FIFO as a safetensors file read with --no-mmap: %s %s" % (rc, err))

    # a directory as the model: a Hugging Face checkpoint folder, which this one is not
    empty = os.path.join(tmp, "empty-dir")
    os.mkdir(empty)
    rc, out, err = inspect(empty)
    check(rc == 2 and "%s: a safetensors checkpoint needs config.json (not found: %s/config.json)"
          % (empty, empty) in err, "directory as a model: %s %s" % (rc, err))
    # ... and a directory where the index names a shard file
    os.remove(weights)
    os.mkdir(os.path.join(ckpt, "shard.safetensors"))
    json.dump({"weight_map": {"token_embd.weight": "shard.safetensors"}},
              open(os.path.join(ckpt, "model.safetensors.index.json"), "w"))
    rc, out, err = inspect(ckpt)
    check(rc == 2 and "cannot read '%s/shard.safetensors': it is a directory, not a regular file"
          % ckpt in err,
          "directory as a safetensors shard: %s %s" % (rc, err))


def check_mkmodel_errors(mkmodel, tmp):
    out = os.path.join(tmp, "x")
    for args, want in [
        (["--out", out, "--format", "safetensors", "--type", "q8_0"], "safetensors holds f32, f16 and bf16 only"),
        (["--out", out, "--vocab", "100"], "the byte tokenizer has 258 tokens; --vocab 100 is too small"),
        (["--out", out, "--dim", "60", "--heads", "8"], "dim/heads must be even"),
        (["--out", out, "--type", "q4_0", "--ffn", "100"],
         "--type Q4_0 needs --dim and --ffn multiples of its block size 32"),
        (["--out", out, "--type", "q4_k_m"],
         "--type Q4_K needs --dim and --ffn multiples of its block size 256"),
        (["--out", out, "--type", "f8"], "bad value for --type"),
        (["--out", out, "--type", "q8_k"], "bad value for --type"),
        (["--out", out, "--rope-freqs"], "--rope-freqs goes with --rope-scaling llama3"),
        (["--out", out, "--wat"], "unknown option '--wat'"),
        (["--dim", "64"], "--out PATH is required"),
        (["--from", os.path.join(tmp, "none.gguf"), "--out", out], "none.gguf: cannot open model"),
    ]:
        rc, _, err = run([mkmodel] + args)
        check(rc == 2 and want in err, "mkmodel %s: %d %s" % (" ".join(args), rc, err))


# The last line of `evalmesh inspect` for each shared vocabulary-only GGUF (no tensors; some of
# them for architectures evalmesh does not run).
ARCHS = "llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3"
NO_TENSORS = "the file has no tensors (a vocabulary-only file)"
VOCAB_ONLY = {
    "deepseek-coder": ("llama", 25, "runnable: no: " + NO_TENSORS),
    "falcon": ("falcon", 18, "runnable: no: architecture 'falcon' is not supported (supported: "
               + ARCHS + "); " + NO_TENSORS),
    "gpt-2": ("gpt2", 16, "runnable: no: architecture 'gpt2' is not supported (supported: "
              + ARCHS + "); " + NO_TENSORS),
    "llama-spm": ("llama", 22, "runnable: no: " + NO_TENSORS),
    "starcoder": ("starcoder2", 19, "runnable: no: architecture 'starcoder2' is not supported "
                  "(supported: " + ARCHS + "); " + NO_TENSORS),
}
SUPPORTED_TYPES = ("F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ2_XXS, "
                   "IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, BF16, TQ1_0, "
                   "TQ2_0, MXFP4, NVFP4, TORCHAO_I8, TORCHAO_I4_G32, TORCHAO_I4_G64, "
                   "TORCHAO_I4_G128, TORCHAO_I4_G256")


def check_inspect_vocab_only(evalmesh, shared):
    """The shared vocabulary-only GGUFs are described (exit 0) with their verdicts."""
    for name, (arch, keys, verdict) in VOCAB_ONLY.items():
        path = os.path.join(shared, "tokenizers", name, "ggml-vocab-%s.gguf" % name)
        rc, out, err = run([evalmesh, "inspect", path])
        lines = out.splitlines()
        check(rc == 0 and err == "", "inspect %s: rc %d %s" % (name, rc, err))
        for want in ["architecture: " + arch, "header sha256: " + gguf_header_sha(path),
                     "metadata: %d keys" % keys, "tensors: 0"]:
            check(want in lines, "inspect %s: line %r missing" % (name, want))
        check(lines[-2:] == ["tensors by type: none", verdict],
              "inspect %s: last lines %r" % (name, lines[-2:]))
        rc, out, err = run([evalmesh, "inspect", path, "--json"])
        j = json.loads(out) if rc == 0 else {}
        check(j.get("runnable") is False and ["runnable: no: " + "; ".join(j["reasons"])]
              == [verdict] and j["tensors_by_type"] == {} and j["hyperparameters"] is None
              and j["metadata"]["general.architecture"] == arch
              and j["metadata"]["tokenizer.ggml.tokens"]["array"] == "string",
              "inspect --json %s: %r" % (name, {k: j.get(k) for k in ("runnable", "reasons")}))
    falcon = os.path.join(shared, "tokenizers", "falcon", "ggml-vocab-falcon.gguf")
    rc, out, _ = run([evalmesh, "inspect", falcon])
    for want in ['  general.architecture                     "falcon"',
                 "  falcon.attention.head_count_kv           1",
                 "  falcon.attention.layer_norm_epsilon      1e-05",
                 "  tokenizer.ggml.tokens                    [65024 x string]",
                 "  tokenizer.ggml.token_type                [65024 x int32]"]:
        check(want in out.splitlines(), "inspect falcon: metadata line %r missing" % want)


def check_inspect_any_gguf(evalmesh, tmp):
    """Any well-formed GGUF is described (exit 0) and ends with its runnable verdict."""
    shared = os.environ.get("EVALMESH_SHARED_DATA", "../shared/data")
    if os.path.isdir(os.path.join(shared, "tokenizers")):
        check_inspect_vocab_only(evalmesh, shared)
    else:
        print("note: %s/tokenizers absent, the vocabulary-only inspects are skipped" % shared)
    try:
        import gguf
        import numpy as np
    except ImportError:
        print("note: the PyPI package gguf is not installed: the GGUFWriter files are skipped")
        return
    # An architecture evalmesh does not run, Q8_K tensors (a type it does not compute with) and
    # a misspelt pre-tokenizer: one reason each, in that order.
    odd = os.path.join(tmp, "odd.gguf")
    w = gguf.GGUFWriter(odd, "mamba9")
    w.add_uint32("mamba9.block_count", 1)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smolm")
    w.add_token_list([chr(b) for b in range(33, 127)] + ["ab"])
    w.add_token_merges(["a b"])
    w.add_tensor("blk.0.ssm.weight", np.zeros((2, 292), np.uint8),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_K)
    w.add_tensor("blk.1.ssm.weight", np.zeros((1, 292), np.uint8),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_K)
    w.add_tensor("norm.weight", np.ones(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    rc, out, err = run([evalmesh, "inspect", odd])
    lines = out.splitlines()
    check(rc == 0 and err == "", "inspect odd: rc %d %s" % (rc, err))
    for want in ["architecture: mamba9", "  mamba9.block_count                       1",
                 '  tokenizer.ggml.pre                       "smolm"', "tensors: 3",
                 "  blk.0.ssm.weight                 Q8_K  256 x 2                     584",
                 "  norm.weight                      F32   4                            16",
                 "  total                                                              892",
                 "tensors by type: F32 1 Q8_K 2"]:
        check(want in lines, "inspect odd: line %r missing" % want)
    reasons = ["architecture 'mamba9' is not supported (supported: %s)" % ARCHS,
               "tensor blk.0.ssm.weight and 1 more have type Q8_K, which evalmesh does not "
               "compute with (supported: %s)" % SUPPORTED_TYPES,
               "tokenizer.ggml.pre 'smolm' is not a pre-tokenizer llama.cpp knows (the closest "
               "known one is 'smollm')"]
    check(lines[-1] == "runnable: no: " + "; ".join(reasons), "inspect odd: %r" % lines[-1])
    rc, out, _ = run([evalmesh, "inspect", odd, "--json"])
    j = json.loads(out)
    check(j["runnable"] is False and j["reasons"] == reasons
          and j["tensors_by_type"] == {"F32": 1, "Q8_K": 2}, "inspect --json odd: %r" % j)
    # A llama file missing its hyperparameters: the strict loader's reason.
    bare = os.path.join(tmp, "bare.gguf")
    w = gguf.GGUFWriter(bare, "llama")
    w.add_tensor("output_norm.weight", np.ones(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    rc, out, _ = run([evalmesh, "inspect", bare])
    check(rc == 0 and out.splitlines()[-1] == "runnable: no: missing metadata key "
          "llama.context_length", "inspect bare: %d %r" % (rc, out.splitlines()[-1:]))


def check_inspect_smollm2(evalmesh):
    """The real SmolLM2-135M-Instruct Q4_1 (tools/fetch-smollm2; skipped offline)."""
    source = os.environ.get("EVALMESH_SOURCE_DIR", ".")
    fetch = subprocess.run([os.path.join(source, "tools", "fetch-smollm2")], capture_output=True,
                           text=True)
    if fetch.returncode != 0:
        print("note: SmolLM2 inspect skipped: tools/fetch-smollm2 could not fetch it: "
              + fetch.stderr.strip())
        return
    model = fetch.stdout.strip()
    rc, out, err = run([evalmesh, "inspect", model])
    lines = out.splitlines()
    check(rc == 0, "inspect SmolLM2: rc %d %s" % (rc, err))
    for want in ["architecture: llama", "file size:    98362432 bytes", "  block_count         30",
                 'tokenizer: gpt2, 49152 tokens, bos 1 "<|im_start|>", eos 2 "<|im_end|>"',
                 "metadata: 33 keys", '  tokenizer.ggml.pre                       "smollm"',
                 "tensors: 272",
                 "  token_embd.weight                Q8_0  576 x 49152            30081024"]:
        check(want in lines, "inspect SmolLM2: line %r missing" % want)
    check(lines[-2:] == ["tensors by type: F32 61 Q4_1 210 Q8_0 1", "runnable: yes"],
          "inspect SmolLM2: last lines %r" % lines[-2:])
    rc, out, _ = run([evalmesh, "inspect", model, "--json"])
    j = json.loads(out)
    check(j["runnable"] is True and j["reasons"] == []
          and j["tensors_by_type"] == {"F32": 61, "Q4_1": 210, "Q8_0": 1},
          "inspect --json SmolLM2: %r" % {k: j[k] for k in ("runnable", "tensors_by_type")})


def main():
    mkmodel = sys.argv[1]
    evalmesh = os.environ.get("EVALMESH_BIN")
    if not evalmesh or not os.path.exists(evalmesh):
        print("SKIPPED: EVALMESH_BIN is not built")
        return 77
    tmp = tempfile.mkdtemp(prefix="em-model-cli-")
    check_inspect(evalmesh, mkmodel, tmp)
    check_inspect_any_gguf(evalmesh, tmp)
    check_inspect_smollm2(evalmesh)
    check_stage(evalmesh, mkmodel, tmp)
    check_non_finite(evalmesh, mkmodel, tmp)
    check_in_memory(evalmesh, mkmodel, tmp)
    check_not_regular(evalmesh, mkmodel, tmp)
    check_mkmodel_errors(mkmodel, tmp)
    shutil.rmtree(tmp)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
