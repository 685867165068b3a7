"""The SFT data-size ablation of notebook 05, where the sizes differ: each size trained for many epochs.

For every seed and every training-set size n (the first n worked solutions of `data/arith`), the
tiny `qwen2-base` is fine-tuned with the course's SFT trainer for

    steps(n) = max(MIN_STEPS, ceil(EPOCHS * n / BATCH))

optimizer steps of BATCH examples (so the full set of 10,000 is seen EPOCHS times, and a small
set is seen many times over, until its held-out curve has flattened), and evaluated greedily on
the first EVAL_N held-out problems at EVAL_POINTS evenly spaced steps (the curve shows whether
the run reached its plateau). The seed sets the data order and nothing else: every run of size n
trains on the same n solutions from the same base weights.

Writes a JSON file (default `data/experiments/sft_data_size.json`, rewritten after every run so
that a stopped run keeps what it measured) that notebook 05 plots: per run, the eval curve, the
final format and answer reward, the steps, the distinct examples seen and the wall time.

Usage (one torch thread; the 14 runs of notebook 05 took about two hours on a busy 2-core machine):

    OMP_NUM_THREADS=1 python benchmarks/sft_data_size.py --seeds 0 1 2

A stopped run continues with `--resume` (the runs already in the file are kept).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "data" / "experiments" / "sft_data_size.json"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--sizes", nargs="+", default=["128", "256", "512", "1024", "all"])
    p.add_argument("--epochs", type=float, default=4.0, help="passes over the full set (and over any set large enough)")
    p.add_argument("--min-steps", type=int, default=300, help="steps of a small set (its plateau)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--eval-n", type=int, default=500)
    p.add_argument("--eval-points", type=int, default=6)
    p.add_argument("--eval-max-tokens", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already in --out (same settings) and run only the missing ones")
    return p.parse_args(argv)


def steps_for(n: int, args) -> int:
    return max(args.min_steps, math.ceil(args.epochs * n / args.batch_size))


def run_one(n_label: str, seed: int, train, held_out, args) -> dict:
    from course_lib.training.sft_trainer import train_sft
    from course_lib.world.tiny_models import load_tiny

    n = len(train) if n_label == "all" else int(n_label)
    steps = steps_for(n, args)
    model, tokenizer = load_tiny("qwen2-base")
    t0 = time.perf_counter()
    result = train_sft(dict(n_examples=None if n_label == "all" else n, steps=steps, batch_size=args.batch_size,
                            lr=args.lr, warmup_steps=args.warmup_steps, seed=seed,
                            eval_every=max(1, steps // args.eval_points), eval_max_tokens=args.eval_max_tokens,
                            eval_batch_size=args.eval_n),
                       model=model, tokenizer=tokenizer, train_data=train, eval_data=held_out, progress=False)
    seconds = time.perf_counter() - t0
    curve = [{"step": e["step"], "format_reward": e["format_reward"], "answer_reward": e["answer_reward"]}
             for e in result.evals]
    final = result.evals[-1]
    print(f"seed {seed} n {n_label:>5s}: {steps} steps ({steps * args.batch_size / n:.1f} epochs), "
          f"format {final['format_reward']:.3f} answer {final['answer_reward']:.3f}  ({seconds:.0f} s)", flush=True)
    return {"n": n, "label": n_label, "seed": seed, "steps": steps, "epochs": steps * args.batch_size / n,
            "distinct_examples_seen": min(n, steps * args.batch_size), "curve": curve,
            "format_reward": final["format_reward"], "answer_reward": final["answer_reward"], "seconds": seconds}


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from course_lib import gsm8k_to_r1_zero, load_problems

    train = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")]
    held_out = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[: args.eval_n]]
    out = {
        "what": "SFT data-size ablation of qwen2-base on data/arith: each size for many epochs, greedy held-out rewards",
        "command": "OMP_NUM_THREADS=%d python benchmarks/sft_data_size.py %s" % (
            args.threads, " ".join(sys.argv[1:] if argv is None else argv)),
        "settings": {"epochs": args.epochs, "min_steps": args.min_steps, "batch_size": args.batch_size, "lr": args.lr,
                     "warmup_steps": args.warmup_steps, "schedule": "linear warmup, cosine to 0.1 x lr",
                     "eval_n": args.eval_n, "eval_max_tokens": args.eval_max_tokens, "threads": args.threads,
                     "steps_rule": "max(min_steps, ceil(epochs * n / batch_size))"},
        "machine": {"platform": platform.platform(), "torch": torch.__version__,
                    "load_average_at_start": os.getloadavg()[0]},
        "runs": [],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.resume and args.out.is_file():
        before = json.loads(args.out.read_text())
        if before["settings"] != out["settings"]:
            raise SystemExit(f"{args.out}: its settings {before['settings']} differ from these; rerun without --resume")
        out["command"], out["machine"], out["runs"] = before["command"], before["machine"], before["runs"]
    done = {(r["seed"], r["label"]) for r in out["runs"]}
    for seed in args.seeds:
        for label in args.sizes:
            if (seed, label) in done:
                continue
            out["runs"].append(run_one(label, seed, train, held_out, args))
            args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
