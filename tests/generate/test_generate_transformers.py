"""evalmesh's greedy decoding (generate_driver: the cpu backend's prefill and steps) against Hugging
Face transformers' greedy `generate` (float32, do_sample=False, no EOS), committed in
transformers_generate_expected.json by tools/transformers-generate-expected: a random small model
per architecture case (rebuilt here by evalmesh-mkmodel as the same Hugging Face folder), prompts
of 1, 9 and 40 ids and 24 new tokens; and stories260K (the shared GGUF) from BOS alone and from BOS
"Once upon a time", 60 new tokens. The ids must be the same up to the first step where the
reference's best two logits lie within NEAR_TIE (a float32 difference in summation order may
pick either there; the step is reported), and the whole sequence when there is no such step.
Usage: test_generate_transformers.py GENERATE_DRIVER MKMODEL"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402

NEAR_TIE = 1e-4
driver, mkmodel = sys.argv[1], sys.argv[2]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "transformers_generate_expected.json")) as f:
    expected = json.load(f)


def compare(label, model, run):
    want, margin = run["ids"], run["margin"]
    r = subprocess.run([driver, model, str(len(want))] + [str(i) for i in run["prompt"]],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"{label}: generate_driver ran", r.stderr)
    if r.returncode != 0:
        return
    got = [int(i) for i in r.stdout.split()]
    tie = next((s for s, m in enumerate(margin) if m < NEAR_TIE), len(want))
    where = "no near-tie" if tie == len(want) else f"near-tie at step {tie} (lead {margin[tie]:.2e})"
    same = got[:tie] == want[:tie]
    first = next((s for s in range(len(want)) if s >= len(got) or got[s] != want[s]), None)
    print(f"{label}, prompt of {len(run['prompt'])}: {where}, smallest lead {min(margin):.2e}; "
          f"{'identical' if first is None else f'first difference at step {first}'}")
    check(same and len(got) == len(want), f"{label}: the same ids as transformers before {where}",
          f"got {got}\nwant {want}")


with tempfile.TemporaryDirectory() as tmp:
    for case in expected["cases"]:
        folder = os.path.join(tmp, case["label"])
        r = subprocess.run([mkmodel] + case["mkmodel"] + ["--format", "safetensors", "--out",
                                                          folder], capture_output=True, text=True)
        check(r.returncode == 0, f"mkmodel {case['label']}", r.stderr)
        if r.returncode == 0:
            for run in case["runs"]:
                compare(case["label"], folder, run)
shared = os.environ.get("EVALMESH_SHARED_DATA", "")
stories = os.path.join(shared, "models", "stories260K.gguf")
if os.path.isfile(stories):
    for run in expected["stories260K"]:
        compare("stories260K", stories, run)
else:
    print(f"note: {stories} absent; the generated models only")
sys.exit(finish())
