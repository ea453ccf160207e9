"""One lm-evaluation-harness 0.4.13 run for tools/bench-tasks, in the Python that has lm-eval[hf],
torch and gguf: its Hugging Face backend (transformers, float32, on the CPU, torch on THREADS
threads) loads the GGUF file (transformers dequantizes it to float32) and scores one task YAML
with simple_evaluate. Prints one JSON line: acc, acc_norm, the seconds spent importing, loading
the model and evaluating, and the versions.

Usage: lm_eval_run.py MODEL.gguf TASK_DIR TASK --threads N --batch-size B [--add-bos]"""
import argparse
import json
import os
import time

START = time.monotonic()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("task_dir", help="the folder of the task YAML (lm-eval's --include_path)")
    ap.add_argument("task")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--add-bos", action="store_true", help="lm-eval's add_bos_token")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    import lm_eval
    import transformers
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    imported = time.monotonic()
    lm = HFLM(pretrained=os.path.dirname(os.path.abspath(args.gguf)),
              gguf_file=os.path.basename(args.gguf), dtype="float32", device="cpu",
              batch_size=args.batch_size, add_bos_token=args.add_bos)
    loaded = time.monotonic()
    out = lm_eval.simple_evaluate(model=lm, tasks=[args.task],
                                  task_manager=TaskManager(include_path=args.task_dir))
    done = time.monotonic()
    r = out["results"][args.task]
    print(json.dumps({"acc": r["acc,none"], "acc_norm": r["acc_norm,none"],
                      "import_s": imported - START, "load_s": loaded - imported,
                      "evaluate_s": done - loaded, "lm_eval": lm_eval.__version__,
                      "transformers": transformers.__version__, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
