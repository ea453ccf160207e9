"""`evalmesh eval` against lm-evaluation-harness 0.4.13 on the same model and the same task files.

tools/lm-eval-expected ran lm-eval's Hugging Face backend (transformers, float32, batch size 1,
CPU) with --log_samples on the task YAMLs of lm_eval_ref/ and wrote lm_eval_ref/expected.json.
This test rebuilds the same model folder with evalmesh-mkmodel (the weights are a function of its
arguments, so no model file is committed), runs `evalmesh eval` on the same YAMLs and checks:
  - tokenization first: `evalmesh tokenize` on every request's context and context + continuation
    (after lm-eval moves the context's trailing whitespace to the continuation) gives the ids
    lm-eval's _encode_pair got from transformers, BOS included;
  - lm_eval_results.json: n-shot per task; acc and acc_norm (acc for loglikelihood) equal to lm-eval's,
    their standard errors within STDERR_TOL, perplexity within PPL_RTOL relative;
  - samples_<task>.jsonl, one line per document: the document, its target, every request's
    context and continuation strings equal, its log-likelihood within LL_TOL absolute and its
    is_greedy equal, and the document's acc/acc_norm (loglikelihood: acc, perplexity) equal;
  - lmref_gen (generate_until, greedy, a regex filter with group_select and take_first,
    exact_match ignoring case and punctuation): per document the same context and generation
    kwargs, the same greedy text and filtered answer, the same exact_match; the aggregate and
    its standard error as above, keyed by the filter's name.
The model: Llama, dim 64, 2 layers, 4 heads, 2 KV heads, tied embeddings, 128 positions
(max_position_embeddings, which is lm-eval's max_length: lmref_long's contexts of 216 to 218 tokens
are cut from the left), with the Llama 3 tokenizer (../shared/data/tokenizers/llama3) whose
post-processor puts <|begin_of_text|> before every text, as Meta's later release of it does.

Usage: test_lm_eval_reference.py EVALMESH MKMODEL
       test_lm_eval_reference.py --compare-only DIR
The second form compares a run directory in `evalmesh eval`'s layout (lm_eval_results.json,
samples_<task>.jsonl) to expected.json; tools/lm-eval-expected --self-check uses it on a fresh
lm-eval run to show that this test reads expected.json right. Exit 77 (skipped) without the
shared data."""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "stages"))
import checks as c  # noqa: E402

REF_DIR = os.path.join(HERE, "lm_eval_ref")
EXPECTED = os.path.join(REF_DIR, "expected.json")
# (task name, YAML file): the order of --tasks
TASKS = [
    ("lmref_mc0", "mc0.yaml"),
    ("lmref_mc3", "mc3.yaml"),
    ("lmref_space", "space.yaml"),
    ("lmref_long", "long.yaml"),
    ("lmref_ll", "ll.yaml"),
    ("lmref_gen", "gen.yaml"),
]
MAX_LENGTH = 128
MKMODEL_ARGS = ["--format", "safetensors", "--vocab", "128256", "--dim", "64", "--layers", "2",
                "--heads", "4", "--kv-heads", "2", "--ctx", str(MAX_LENGTH), "--tied", "--seed",
                "1"]
LL_TOL = 1e-4  # both sides float32, summed in different orders
STDERR_TOL = 1e-12
PPL_RTOL = 1e-4  # exp(-mean of log-likelihoods each within LL_TOL)
# the Llama 3 tokenizer, relative to the shared data folder
LLAMA3_FILES = ("tokenizers/llama3/tokenizer.json", "tokenizers/llama3/tokenizer_config.json")
BOS = "<|begin_of_text|>"
SPLIT_MARKER = "__lmref_split__"


def write_bos_tokenizer(tokenizer_files, dst_dir):
    """The tokenizer.json of tokenizer_files (LLAMA3_FILES' paths) with a post-processor that puts
    BOS before the text (Meta's later Llama 3 tokenizer.json: ByteLevel, then a
    TemplateProcessing), and the tokenizer_config.json as it is. transformers 5 ignores
    tokenizer_config.json's add_bos_token for this tokenizer class, so the post-processor is the
    one place both tools read BOS from."""
    tokenizer_json, tokenizer_config = tokenizer_files
    os.makedirs(dst_dir, exist_ok=True)
    with open(tokenizer_json, encoding="utf-8") as f:
        tok = json.load(f)
    bos = {"SpecialToken": {"id": BOS, "type_id": 0}}
    bos_ids = [t["id"] for t in tok["added_tokens"] if t["content"] == BOS]
    tok["post_processor"] = {"type": "Sequence", "processors": [tok["post_processor"], {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": BOS, "type_id": 1}}, {"Sequence": {"id": "B",
                                                                            "type_id": 1}}],
        "special_tokens": {BOS: {"id": BOS, "ids": bos_ids, "tokens": [BOS]}}}]}
    with open(os.path.join(dst_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    shutil.copy(tokenizer_config, os.path.join(dst_dir, "tokenizer_config.json"))


def build_model(mkmodel, tokenizer_files, work_dir):
    """Writes the model folder under work_dir with evalmesh-mkmodel and returns its path."""
    tok_dir = os.path.join(work_dir, "tokenizer")
    write_bos_tokenizer(tokenizer_files, tok_dir)
    model_dir = os.path.join(work_dir, "model")
    subprocess.run([mkmodel, "--out", model_dir, "--tokenizer",
                    os.path.join(tok_dir, "tokenizer.json")] + MKMODEL_ARGS, check=True)
    return model_dir


def encoded_strings(context, continuation):
    """The two strings lm-eval's _encode_pair encodes: the context without its trailing
    whitespace, and that context followed by the whitespace and the continuation."""
    stripped = context.rstrip()
    return stripped, stripped + context[len(stripped):] + continuation


def check_tokenization(evalmesh, model_dir, expected):
    """evalmesh tokenize on the strings of every request against lm-eval's ids."""
    requests = [(task, doc["doc_id"], r) for task, t in expected["tasks"].items()
                for doc in t["docs"] for r in doc["requests"] if "continuation" in r]
    texts = []
    for _, _, r in requests:
        texts.extend(encoded_strings(r["context"], r["continuation"]))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        for text in texts:
            f.write(text + "\n" + SPLIT_MARKER + "\n")
        path = f.name
    try:
        out = subprocess.run([evalmesh, "tokenize", model_dir, "--ids-only", "--text-file", path,
                              "--split-marker", SPLIT_MARKER], check=True, capture_output=True,
                             text=True).stdout
    finally:
        os.unlink(path)
    lines = out.splitlines()
    if not c.check_equal(len(lines), len(texts), "evalmesh tokenize: one line per input"):
        return
    for i, (task, doc_id, r) in enumerate(requests):
        context_ids = [int(x) for x in lines[2 * i].split()]
        whole_ids = [int(x) for x in lines[2 * i + 1].split()]
        where = "%s doc %d %r" % (task, doc_id, r["continuation"])
        c.check_equal(context_ids, r["context_ids"], where + ": context ids")
        c.check_equal(whole_ids[len(context_ids):], r["continuation_ids"],
                      where + ": continuation ids (whole minus the context's length)")


def read_output(out_dir):
    """lm_eval_results.json and {task: {doc_id: sample}} of an `evalmesh eval` run directory."""
    with open(os.path.join(out_dir, "lm_eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    samples = {}
    for task, _ in TASKS:
        path = os.path.join(out_dir, "samples_%s.jsonl" % task)
        if not c.check(os.path.isfile(path), "samples file written", path):
            continue
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        samples[task] = {s["doc_id"]: s for s in lines}
        c.check_equal(len(samples[task]), len(lines), "%s: doc_ids unique" % task)
    return results, samples


def compare_aggregates(task, want, got_results, got_nshot):
    c.check_equal(got_nshot.get(task), want["n_shot"], task + ": n-shot")
    got = got_results.get(task)
    if not c.check(got is not None, task + ": in results.json"):
        return
    c.check_equal(got.get("alias"), task, task + ": alias")
    for metric in want["metrics"]:
        key, stderr_key = metric + "," + want["filter"], metric + "_stderr," + want["filter"]
        value, expected = got.get(key), want["results"][key]
        if not c.check(isinstance(value, (int, float)), "%s: %s present" % (task, key)):
            continue
        if metric == "perplexity":
            c.check(math.isclose(value, expected, rel_tol=PPL_RTOL, abs_tol=0),
                    "%s: %s within %g relative" % (task, key, PPL_RTOL),
                    "got %r want %r" % (value, expected))
            continue  # lm-eval bootstraps perplexity's stderr (100,000 resamples)
        c.check_equal(value, expected, "%s: %s" % (task, key))
        stderr = got.get(stderr_key)
        c.check(isinstance(stderr, (int, float))
                and abs(stderr - want["results"][stderr_key]) <= STDERR_TOL,
                "%s: %s within %g" % (task, stderr_key, STDERR_TOL),
                "got %r want %r" % (stderr, want["results"][stderr_key]))


def compare_generation(where, arguments, resps, filtered, want):
    """A generate_until document's one request: the context and generation kwargs, the greedy
    text (a near-tie of the top two logits would show here first) and the filtered answer."""
    if not (c.check_equal(len(arguments), 1, where + ": one request")
            and c.check_equal(len(resps), 1, where + ": one resp")
            and c.check_equal(len(filtered), 1, where + ": one filtered resp")):
        return
    (context, kwargs), (text,), answer = arguments[0], resps[0], filtered[0]
    c.check_equal(context, want["context"], where + ": context")
    c.check_equal(kwargs.get("until"), want["until"], where + ": until")
    c.check_equal(kwargs.get("max_gen_toks"), want["max_gen_toks"], where + ": max_gen_toks")
    c.check_equal(text, want["generation"], where + ": greedy text")
    c.check_equal(answer, want["filtered"], where + ": filtered answer")


def compare_doc(task, metrics, want, got):
    where = "%s doc %d" % (task, want["doc_id"])
    c.check_equal(got.get("doc"), want["doc"], where + ": doc")
    c.check_equal(got.get("target"), want["target"], where + ": target")
    arguments, resps = got.get("arguments") or [], got.get("resps") or []
    if "generation" in want["requests"][0]:
        compare_generation(where, arguments, resps, got.get("filtered_resps") or [],
                           want["requests"][0])
        for metric in metrics:
            c.check_equal(got.get(metric), want["metrics"][metric], "%s: %s" % (where, metric))
        return
    if not (c.check_equal(len(arguments), len(want["requests"]), where + ": requests")
            and c.check_equal(len(resps), len(want["requests"]), where + ": one resp each")):
        return
    for i, (pair, resp, r) in enumerate(zip(arguments, resps, want["requests"])):
        c.check_equal(list(pair), [r["context"], r["continuation"]],
                      "%s request %d: (context, continuation)" % (where, i))
        loglik, greedy = resp
        c.check(abs(loglik - r["loglikelihood"]) <= LL_TOL,
                "%s request %d: log-likelihood within %g" % (where, i, LL_TOL),
                "got %r want %r" % (loglik, r["loglikelihood"]))
        c.check_equal(greedy, r["is_greedy"], "%s request %d: is_greedy" % (where, i))
    for metric in metrics:
        value = got.get(metric)
        if metric == "perplexity":  # lm-eval's per-document value is the log-likelihood
            c.check(isinstance(value, (int, float))
                    and abs(value - want["metrics"][metric]) <= LL_TOL,
                    "%s: perplexity item within %g" % (where, LL_TOL),
                    "got %r want %r" % (value, want["metrics"][metric]))
        else:
            c.check_equal(value, want["metrics"][metric], "%s: %s" % (where, metric))


def compare_output(expected, out_dir):
    results, samples = read_output(out_dir)
    for task, _ in TASKS:
        want = expected["tasks"][task]
        compare_aggregates(task, want, results.get("results", {}), results.get("n-shot", {}))
        got_docs = samples.get(task, {})
        c.check_equal(sorted(got_docs), [d["doc_id"] for d in want["docs"]],
                      task + ": documents in the samples file")
        for doc in want["docs"]:
            if doc["doc_id"] in got_docs:
                compare_doc(task, want["metrics"], doc, got_docs[doc["doc_id"]])


def main():
    with open(EXPECTED, encoding="utf-8") as f:
        expected = json.load(f)
    if len(sys.argv) == 3 and sys.argv[1] == "--compare-only":
        compare_output(expected, sys.argv[2])
        return c.finish()
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    evalmesh, mkmodel = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    c.check_equal(MKMODEL_ARGS, expected["mkmodel_args"], "expected.json made with this model")
    import eval_helpers  # needs EVALMESH_BIN, which ctest sets

    tokenizer_files = eval_helpers.shared_files(*LLAMA3_FILES)  # exits 77 without them
    with tempfile.TemporaryDirectory() as work:
        model_dir = build_model(mkmodel, tokenizer_files, work)
        check_tokenization(evalmesh, model_dir, expected)
        out_dir = os.path.join(work, "out")
        tasks = ",".join(os.path.join(REF_DIR, f) for _, f in TASKS)
        # In lm_eval_ref/, where lm-eval ran: its data_files are relative to the working
        # folder (datasets' rule), which is also the YAML's folder.
        run = subprocess.run([evalmesh, "eval", "-m", model_dir, "--tasks", tasks,
                              "--log-samples", "--run-dir", out_dir], capture_output=True,
                             text=True, cwd=REF_DIR)
        if not c.check_equal(run.returncode, 0, "evalmesh eval exit status"):
            print(run.stdout + run.stderr, file=sys.stderr)
            return c.finish()
        compare_output(expected, out_dir)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
