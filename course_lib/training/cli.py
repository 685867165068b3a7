"""Command line of the reference trainings.

    python -m course_lib.training sft  --config configs/sft_tiny.yaml  [key=value ...]
    python -m course_lib.training grpo --config configs/grpo_tiny.yaml [key=value ...] [--resume]
    python -m course_lib.training ppo  --config configs/ppo_tiny.yaml  [key=value ...] [--resume]
    python -m course_lib.training dpo  --config configs/dpo_tiny.yaml  [key=value ...] [--resume]
    python -m course_lib.training eval --config configs/eval_tiny.yaml model=runs/sft_tiny/model

Every config field can be overridden as `key=value` (YAML scalars: `lr=3e-4`, `n_examples=null`).
A run writes into `output_dir` (default `runs/<config name>`): `config.json`, `metrics.jsonl`
(one line per step), `curves.png`, `checkpoints/step_N/` (every `checkpoint_every` steps and at
the end) and `model/` (the final weights, loadable as the `model` of the next stage).
`--resume` continues a killed run from its last checkpoint, exactly (same data, same RNG).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..gsm8k import DataFormatError
from .checkpoint import NonFiniteLossError
from .config import load_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.training", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["sft", "grpo", "ppo", "dpo", "eval"])
    parser.add_argument("--config", help="YAML file of config fields")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in output_dir")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_intermixed_args(argv)

    try:
        cfg = load_config(args.command, args.config, args.overrides)
        if not cfg.output_dir:
            name = Path(args.config).stem if args.config else args.command
            cfg.output_dir = str(Path("runs") / name)
        progress = not args.no_progress
        if args.command == "sft":
            from .sft_trainer import train_sft

            result = train_sft(cfg, resume=args.resume, progress=progress)
        elif args.command == "grpo":
            from .grpo_trainer import train_grpo

            result = train_grpo(cfg, resume=args.resume, progress=progress)
        elif args.command == "ppo":
            from .ppo_trainer import train_ppo

            result = train_ppo(cfg, resume=args.resume, progress=progress)
        elif args.command == "dpo":
            from .dpo_trainer import train_dpo

            result = train_dpo(cfg, resume=args.resume, progress=progress)
        else:
            return run_eval_command(cfg, progress)
    except NonFiniteLossError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except (FileNotFoundError, ValueError, DataFormatError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from .plots import plot_run

    png = plot_run(cfg.output_dir)
    summary = {"steps": result.steps, "seconds": round(result.seconds, 1), "eval": result.eval,
               "model": str(Path(cfg.output_dir) / "model"), "curves": str(png)}
    print(json.dumps(summary, indent=2))
    return 0


def run_eval_command(cfg, progress: bool) -> int:
    from ..rollouts import make_engine
    from .common import eval_examples_for
    from .evaluation import evaluate, log_generations
    from .models import load_model_and_tokenizer, set_seed

    set_seed(cfg.seed)
    model, tokenizer = load_model_and_tokenizer(cfg)
    model.eval()
    examples = eval_examples_for(cfg)
    t0 = time.perf_counter()
    engine = make_engine(cfg.engine, model, tokenizer, **(cfg.engine_kwargs or {}))
    t1 = time.perf_counter()
    res = evaluate(engine, tokenizer, examples, max_tokens=cfg.eval_max_tokens, temperature=cfg.temperature,
                   batch_size=cfg.eval_batch_size, seed=cfg.seed, progress=progress)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    # the engine's start (a vLLM engine loads and warms up) apart from the generation and grading of the examples
    res = {"model": cfg.model, "split": cfg.eval_split, **res, "engine_start_seconds": round(t1 - t0, 2),
           "seconds": round(time.perf_counter() - t1, 2)}
    if cfg.log_generations:
        res["generations"] = log_generations(model, tokenizer, examples[: cfg.log_generations],
                                             out / "generations.jsonl", engine=engine,
                                             max_tokens=cfg.eval_max_tokens, temperature=cfg.temperature,
                                             batch_size=cfg.eval_batch_size, seed=cfg.seed)
    (out / "eval.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
