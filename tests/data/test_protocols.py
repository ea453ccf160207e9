"""Window construction of the chunked, sliding and rolling protocols against independent Python
re-implementations of llama.cpp's perplexity loop, Hugging Face's perplexity guide and
lm-evaluation-harness's get_rolling_token_windows + make_disjoint_window; the word count
against lm-evaluation-harness's len(re.split(r"\\s+", doc)); and the wikitext detokenizer
against lm-evaluation-harness's wikitext_detokenizer (on the WikiText-2 test split when
../shared/data is present).

Usage: test_protocols.py PATH_TO_data_probe"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check_equal, finish  # noqa: E402

PROBE = sys.argv[1]


def probe(*args):
    out = subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True)
    return out.returncode, out.stdout


def parse(text):
    """[(doc, inputs, scored_targets, words, bytes)] from the probe's output."""
    rows = []
    for line in text.splitlines():
        head, inputs, targets, counts = re.match(r"(\d+):(.*)\|(.*)\|(.*)", line).groups()
        w, b = map(int, counts.split())
        rows.append((int(head), list(map(int, inputs.split())), list(map(int, targets.split())), w, b))
    return rows


def ref_chunked(n_tokens, n_ctx, bos, max_windows):
    """llama.cpp perplexity(): n_chunk = n_tokens / n_ctx chunks; tokens[start] replaced by BOS;
    logits at positions first = n_ctx/2 .. n_ctx-2 scored against tokens start+first+1 ..."""
    tokens = [1000 + i for i in range(n_tokens)]
    n_chunk = n_tokens // n_ctx
    if max_windows > 0:
        n_chunk = min(n_chunk, max_windows)
    first = n_ctx // 2
    rows = []
    for i in range(n_chunk):
        start = i * n_ctx
        chunk = tokens[start:start + n_ctx]
        if bos >= 0:
            chunk[0] = bos
        # the last position's logits are never used, so the model input stops one short
        scored = [tokens[start + first + 1 + k] for k in range(n_ctx - 1 - first)]
        rows.append((0, chunk[:n_ctx - 1], scored, 0, 0))
    return rows


def ref_sliding(n_tokens, max_length, stride, max_windows):
    """The loop of https://huggingface.co/docs/transformers/perplexity: labels of the first
    len - trg_len positions are -100, and the model shifts labels by one."""
    ids = [1000 + i for i in range(n_tokens)]
    rows = []
    prev_end_loc = 0
    for begin_loc in range(0, n_tokens, stride):
        if max_windows > 0 and len(rows) == max_windows:
            break
        end_loc = min(begin_loc + max_length, n_tokens)
        trg_len = end_loc - prev_end_loc
        input_ids = ids[begin_loc:end_loc]
        labels = list(input_ids)
        for k in range(len(labels) - trg_len):
            labels[k] = -100
        shifted = labels[1:]  # position k predicts labels[k + 1]
        scored = [t for t in shifted if t != -100]
        rows.append((0, input_ids[:-1], scored, 0, 0))
        prev_end_loc = end_loc
        if end_loc == n_tokens:
            break
    return rows


def get_rolling_token_windows(token_list, prefix_token, max_seq_len, context_len):
    """lm_eval.utils.get_rolling_token_windows, rewritten from its documented behaviour."""
    assert 1 <= context_len <= max_seq_len
    if not token_list:
        return
    pred_len = max_seq_len - context_len + 1
    predicted = 0
    first_seq_len = min(max_seq_len, len(token_list))
    yield [prefix_token] + token_list[: first_seq_len - 1], token_list[:first_seq_len]
    predicted += first_seq_len
    while predicted < len(token_list):
        window_pred_len = min(len(token_list) - predicted, pred_len)
        window_end = predicted + window_pred_len
        yield (token_list[window_end - max_seq_len - 1: window_end - 1],
               token_list[window_end - window_pred_len: window_end])
        predicted += window_pred_len


def make_disjoint_window(pair):
    a, b = pair
    return a[: len(a) - (len(b) - 1)], b


def ref_rolling(max_length, prefix, max_windows, doc_lens):
    rows = []
    start = 0
    for d, n in enumerate(doc_lens):
        tokens = [1000 + start + i for i in range(n)]
        start += n
        doc_rows = []
        for context, continuation in map(make_disjoint_window,
                                         get_rolling_token_windows(tokens, prefix, max_length, 1)):
            # HFLM._loglikelihood_tokens: inp = (context + continuation)[-(max_length + 1):][:-1]
            inp = (context + continuation)[-(max_length + 1):][:-1]
            first = not doc_rows
            doc_rows.append((d, inp, continuation, 10 + d if first else 0, 100 + d if first else 0))
        if max_windows > 0 and len(rows) + len(doc_rows) > max_windows:
            break
        rows.extend(doc_rows)
    return rows


# chunked: sizes around the chunk boundaries, odd and even n_ctx, with and without BOS
for n_tokens in [8, 9, 16, 17, 31, 100]:
    for n_ctx in [4, 5, 8]:
        for bos in [1, -1]:
            for cap in [0, 2]:
                rc, out = probe("chunked", n_tokens, n_ctx, bos, cap)
                check_equal(parse(out), ref_chunked(n_tokens, n_ctx, bos, cap), f"chunked {n_tokens} {n_ctx} {bos} {cap}")
rc, out = probe("chunked", 7, 8, 1, 0)
check_equal((rc, out.strip()), (2, "error: the text has 7 tokens: fewer than one chunk of n_ctx = 8 tokens"), "chunked too small")

# sliding: every token after the first scored exactly once
for n_tokens in [2, 3, 10, 11, 37, 64]:
    for max_length, stride in [(4, 1), (4, 2), (4, 3), (8, 3), (16, 8), (128, 5)]:
        for cap in [0, 3]:
            rc, out = probe("sliding", n_tokens, max_length, stride, cap)
            rows = parse(out)
            check_equal(rows, ref_sliding(n_tokens, max_length, stride, cap), f"sliding {n_tokens} {max_length} {stride} {cap}")
            if cap == 0:
                scored = [t for r in rows for t in r[2]]
                check_equal(scored, [1000 + i for i in range(1, n_tokens)], f"sliding {n_tokens} {max_length} {stride} once")
rc, out = probe("sliding", 10, 4, 4, 0)
check_equal(rc, 2, "sliding stride == max_length")
check_equal(out.strip(), "error: stride = 4 must be at least 1 and less than max_length = 4 (for disjoint windows use the chunked or rolling protocol)", "sliding stride message")

# rolling: documents of many lengths, including empty ones, and the whole-document cap
for max_length in [1, 2, 4, 7]:
    for docs in [[1], [5], [4, 0, 9], [13, 1, 8, 0], [30, 2]]:
        for cap in [0, 3]:
            rc, out = probe("rolling", max_length, 7, cap, *docs)
            want = ref_rolling(max_length, 7, cap, docs)
            if rc != 0:  # only when the cap is below the first non-empty document's windows
                check_equal((rc, want), (2, []), f"rolling {max_length} {docs} {cap} rc")
                check_equal(out.startswith("error: max_windows = 3 is smaller than the "), True, f"rolling {max_length} {docs} {cap} error")
                continue
            check_equal(parse(out), ref_rolling(max_length, 7, cap, docs), f"rolling {max_length} {docs} {cap}")
rc, out = probe("rolling", 2, 7, 1, 9)
check_equal((rc, out.strip()), (2, "error: max_windows = 1 is smaller than the 5 windows of the first document"), "rolling cap below first document")

# words: Python's \s is str.isspace(); leading and trailing whitespace count as lm-eval counts them
docs = ["", "one", "two words", "  lead", "trail \t", "a\tb\nc\rd\x0be\x0cf", "x\u00a0y\u2003z\u3000w",
        "no\u200bbreak", "a\x1cb\x1dc\x1ed\x1fe", "k\x85l\u2028m\u2029n\u202fo\u205fp\u1680q",
        "multi   \n\n  space", "héllo wörld ünïcode"]
with tempfile.NamedTemporaryFile("w", encoding="utf-8", delete=False) as f:
    f.write("@@@".join(docs))
    path = f.name
rc, out = probe("words", path)
os.unlink(path)
check_equal([int(x) for x in out.split()], [len(re.split(r"\s+", d)) for d in docs], "words")



def wikitext_detokenizer(string):
    """lm_eval/tasks/wikitext/preprocess_wikitext.py: wikitext_detokenizer (on doc["page"])."""
    # contractions
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    # number separators
    string = string.replace(" @-@ ", "-")
    string = string.replace(" @,@ ", ",")
    string = string.replace(" @.@ ", ".")
    # punctuation
    string = string.replace(" : ", ": ")
    string = string.replace(" ; ", "; ")
    string = string.replace(" . ", ". ")
    string = string.replace(" ! ", "! ")
    string = string.replace(" ? ", "? ")
    string = string.replace(" , ", ", ")
    # double brackets
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    # miscellaneous
    string = string.replace("= = = =", "====")
    string = string.replace("= = =", "===")
    string = string.replace("= =", "==")
    string = string.replace(" " + chr(176) + " ", chr(176))
    string = string.replace(" \n", "\n")
    string = string.replace("\n ", "\n")
    string = string.replace(" N ", " 1 ")
    string = string.replace(" 's", "'s")
    return string


# wikitext detokenizer: synthetic cases, then the whole WikiText-2 test split when present
texts = [" = = Early life = = \n He was born in 1 @,@ 000 B.C. ( in a ( small ) town ) ; the \" best \" . \n",
         "the players ' scores were 3 @.@ 5 and 4 @-@ 2 , at 20 \u00b0 C ! Why ? [ see { note } ] ",
         "it 's N years /' 5/ old ' quoted '  and ( unclosed",
         "\u3000( \u2003x\u00a0) \" \" ''  \n \n  = = = = Deep = = = =", ""]
wiki = os.path.join(os.environ.get("EVALMESH_SHARED_DATA", ""), "text", "wikitext-2-raw-v1.test.txt")
if os.path.exists(wiki):
    texts.append(open(wiki, encoding="utf-8").read())
for i, t in enumerate(texts):
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", delete=False) as f:
        f.write(t)
        path = f.name
    out = subprocess.run([PROBE, "detok", path], capture_output=True).stdout.decode("utf-8")
    os.unlink(path)
    want = wikitext_detokenizer(t)
    if out != want:
        k = next((j for j in range(min(len(out), len(want))) if out[j] != want[j]), min(len(out), len(want)))
        check_equal(out[k - 40:k + 40], want[k - 40:k + 40], f"detok text {i} at {k}")

sys.exit(finish())
