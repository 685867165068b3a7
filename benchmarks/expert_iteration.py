"""Expert iteration against SFT on gold solutions, from `qwen2-sft`, on several seeds (notebook 05).

Both start from the committed `qwen2-sft` (the base model after SFT on the first 128 worked
solutions: format ~0.98, answer ~0.51) and use the same QUESTIONS questions that follow those 128
in `data/arith/train.jsonl`:

- expert iteration (`course_lib.training.sft_trainer.expert_iteration`): ITERATIONS rounds of
  QUESTIONS / ITERATIONS questions, SAMPLES samples of each at temperature 1, keep the distinct
  correct ones (graded by `course_lib.evaluate` with `r1_zero_reward_fn`), SFT on them;
  final answers only;
- SFT on the gold worked solutions of the same questions, with the same SFT settings.

Every point is greedy held-out format and answer reward on the first EVAL_N test problems. The
seed sets the sampling and the data order. Each learning rate in --lrs is run on every seed (a
fresh AdamW on the model's own, already likely samples turns a large learning rate into noise).

Writes `data/experiments/expert_iteration.json` (rewritten after every run), which notebook 05
plots. Usage (one torch thread; about 20 minutes for two learning rates and three seeds on one
core of a busy 2-core machine):

    OMP_NUM_THREADS=1 python benchmarks/expert_iteration.py --seeds 0 1 2 --lrs 2e-4 1e-3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "data" / "experiments" / "expert_iteration.json"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lrs", type=float, nargs="+", default=[2e-4, 1e-3])
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--questions", type=int, default=384, help="questions in all (split evenly over the iterations)")
    p.add_argument("--samples", type=int, default=4, help="samples per question")
    p.add_argument("--epochs", type=float, default=2.0, help="SFT epochs over each iteration's kept samples")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-n", type=int, default=500)
    p.add_argument("--max-tokens", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return p.parse_args(argv)


def run_seed(seed: int, lr: float, train, held_out, args) -> dict:
    from course_lib import evaluate as graded_evaluate
    from course_lib.training.evaluation import evaluate
    from course_lib.training.sft_trainer import expert_iteration, train_sft
    from course_lib.world.tiny_models import load_tiny

    sft = {"lr": lr, "batch_size": args.batch_size, "epochs": args.epochs, "warmup_steps": 0}
    questions = train[128 : 128 + args.questions]
    model, tokenizer = load_tiny("qwen2-sft")
    t0 = time.perf_counter()
    history = expert_iteration(model, tokenizer, questions, held_out, evaluate_fn=graded_evaluate,
                               n_iterations=args.iterations, questions_per_iteration=args.questions // args.iterations,
                               samples_per_question=args.samples, max_tokens=args.max_tokens, sft=sft, seed=seed)
    ei_seconds = time.perf_counter() - t0
    gold_model, tokenizer = load_tiny("qwen2-sft")
    t0 = time.perf_counter()
    run = train_sft(dict(sft, seed=seed), model=gold_model, tokenizer=tokenizer, train_data=questions, eval_data=[],
                    progress=False)
    gold = evaluate(gold_model, tokenizer, held_out, max_tokens=args.max_tokens, batch_size=len(held_out))
    gold_seconds = time.perf_counter() - t0
    print(f"seed {seed} lr {lr:g}: EI answer " + " -> ".join(f"{h['answer_reward']:.3f}" for h in history)
          + f" ({ei_seconds:.0f} s); gold SFT {gold['answer_reward']:.3f} ({run.steps} steps, {gold_seconds:.0f} s)",
          flush=True)
    return {"seed": seed, "lr": lr, "expert_iteration": history, "expert_iteration_seconds": ei_seconds,
            "gold_sft": {"steps": run.steps, "format_reward": gold["format_reward"],
                         "answer_reward": gold["answer_reward"], "seconds": gold_seconds}}


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from course_lib import gsm8k_to_r1_zero, load_problems

    train = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")]
    held_out = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[: args.eval_n]]
    out = {
        "what": "expert iteration vs SFT on gold solutions of the same questions, from qwen2-sft; greedy held-out rewards",
        "command": "OMP_NUM_THREADS=%d python benchmarks/expert_iteration.py %s" % (
            args.threads, " ".join(sys.argv[1:] if argv is None else argv)),
        "settings": {"iterations": args.iterations, "questions": args.questions, "samples_per_question": args.samples,
                     "temperature": 1.0, "sft_epochs": args.epochs, "batch_size": args.batch_size, "warmup_steps": 0,
                     "eval_n": args.eval_n, "max_tokens": args.max_tokens, "threads": args.threads,
                     "questions_from": "data/arith/train.jsonl records 128 .. 128 + questions"},
        "machine": {"platform": platform.platform(), "torch": torch.__version__,
                    "load_average_at_start": os.getloadavg()[0]},
        "runs": [],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for lr in args.lrs:
        for seed in args.seeds:
            out["runs"].append(run_seed(seed, lr, train, held_out, args))
            args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
