"""`evalmesh generate` on stories260K against llama.cpp's greedy text (the committed
llama_cpp_generate_expected.json, written by tools/llama-cpp-generate-expected with
llama-completion, temperature 0, F32 key-value cache): from each prompt, 60 tokens on 2 threads,
the same text. llama-completion prints the first generated piece with SentencePiece's leading
space, which a decode of the generated ids drops (as Hugging Face's tokenizers do), and ends its
output with "\\n\\n" of its own (completion.cpp's last LOG); evalmesh prints the text and one
newline. Then all five prompts in one call, decoded together: the same texts, in order. Skipped
without the shared data.
Usage: test_generate_llama_cpp.py EVALMESH"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402
from generate_fixtures import reference, stories260k  # noqa: E402

evalmesh = sys.argv[1]
stories = stories260k()
reference = reference("llama_cpp_generate_expected.json")

wanted = []
for case in reference["cases"]:
    printed = case["printed"]
    check(printed.endswith("\n\n"),
          f"prompt {case['prompt']!r}: llama-completion's closing newlines",
          repr(printed[-20:]))
    want = printed[:-2]
    want = want[1:] if want.startswith(" ") else want
    wanted.append(want)
    r = subprocess.run([evalmesh, "generate", "-m", stories, "-p", case["prompt"], "-n",
                        str(case["max_tokens"]), "-t", "2"], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0 and r.stdout == want + "\n",
          f"prompt {case['prompt']!r}: llama.cpp's greedy text",
          f"rc={r.returncode}\n got: {r.stdout!r}\nwant: {want!r}\n{r.stderr[-800:]}")
together = ["generate", "-m", stories, "-n", str(reference["cases"][0]["max_tokens"]), "-t", "2"]
for case in reference["cases"]:
    together += ["-p", case["prompt"]]
r = subprocess.run([evalmesh] + together, capture_output=True, text=True, timeout=120)
check(r.returncode == 0 and r.stdout == "".join(w + "\n" for w in wanted),
      "the five prompts decoded together: llama.cpp's texts in order", r.stdout + r.stderr[-800:])
check(f"generate: {len(wanted)} sequences" in r.stderr, "the figures line", r.stderr[-800:])
sys.exit(finish())
